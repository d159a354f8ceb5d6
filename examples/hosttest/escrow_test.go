package hosttest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/escrow"
)

func TestMain(m *testing.M) { celebritytest.Main(m) }

// TestSeatSaleSurvivesLostReplies is the guarantee a ticket shop relies on: a buyer whose
// purchase ran on the cluster but whose reply was lost retries with the same ID and gets
// the seat it already holds, never a second one, and the seats sold never exceed capacity.
// The cluster is a real 3-master Redis Cluster; the lost replies are real: the command
// reaches the server and runs, and the connection drops before the reply arrives.
func TestSeatSaleSurvivesLostReplies(t *testing.T) {
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Masters: 3})
	ctx := t.Context()
	// The test's servers keep no AOF: accept that, as the check is not what is tested.
	opts := escrow.CentralOptions{Name: "course-72", Capacity: 10, Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true}

	shop, err := escrow.NewCentral(cl.Client(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := shop.Init(ctx); err != nil {
		t.Fatal(err)
	}
	// The lossy buyers' client: its replies can be dropped, and go-redis must not hide a drop
	// by retrying on its own (a cluster client retries a network error as a redirect too).
	inj := faults.New()
	lossy, err := escrow.NewCentral(cl.Client(t, func(o *redis.ClusterOptions) {
		o.Dialer = inj.Dialer(nil)
		o.MaxRetries, o.MaxRedirects = -1, -1
	}), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shop.Acquire(ctx, "warm-up"); err != nil { // loads the script on the master
		t.Fatal(err)
	}

	held := map[int]string{}
	for i := range 4 {
		buyer := fmt.Sprintf("buyer-%d", i)
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: buyer}, 1)
		if _, err := lossy.Acquire(ctx, buyer); !errors.Is(err, faults.ErrReplyDropped) {
			t.Fatalf("%s: the purchase's reply was not dropped: %v", buyer, err)
		}
		g, err := shop.Acquire(ctx, buyer) // the retry, by the same ID
		if err != nil {
			t.Fatalf("%s's retry: %v", buyer, err)
		}
		if !g.Replayed {
			t.Errorf("%s's retry was granted a new seat %d instead of the one its lost purchase took", buyer, g.Permit)
		}
		if other, ok := held[g.Permit]; ok {
			t.Errorf("seat %d sold to %s and %s", g.Permit, other, buyer)
		}
		held[g.Permit] = buyer
	}
	if inj.Dropped() != 4 {
		t.Fatalf("%d replies dropped, want 4", inj.Dropped())
	}
	rep, err := shop.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || rep.Held != 5 {
		t.Fatalf("audit after 5 sales (1 warm-up, 4 with a lost reply): %+v", rep)
	}
}
