package celebritytest_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
)

// incrOnce is the code under test in this example: it adds 1 to a counter once per
// operation ID, whatever retries and lost replies do.
func incrOnce(ctx context.Context, c redis.UniversalClient, key, opID string) error {
	return c.Eval(ctx, `if redis.call('SET', KEYS[1]..':op:'..ARGV[1], 1, 'NX', 'EX', 60) then
  redis.call('INCR', KEYS[1]) end return 1`, []string{key}, opID).Err()
}

// checkIncrOnce is a host's test of incrOnce, on a standalone server and on the shared
// 3-master cluster (celebritytest.Both), with the reply of the script lost once (faults):
// a retry through go-redis or by the caller must not count twice. In a test file it reads
// "func TestIncrOnce(t *testing.T)", and the package's TestMain runs celebritytest.Main(m),
// which stops the shared servers when the binary ends.
func checkIncrOnce(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		key := celebritytest.Prefix(t) + "{views}" // this test's prefix, the same on every call
		inj := faults.New()
		var lossy redis.UniversalClient
		if _, ok := c.(*redis.ClusterClient); ok {
			lossy = celebritytest.SharedCluster(t).Client(t, func(o *redis.ClusterOptions) { o.Dialer = inj.Dialer(nil) })
		} else {
			lossy = celebritytest.Standalone(t).Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil) })
		}
		inj.DropReply(faults.Match{Command: "EVAL"}, 1) // the script runs, its reply is lost
		if err := incrOnce(ctx, lossy, key, "op-1"); err != nil {
			t.Fatal(err) // go-redis sent it again: a replay
		}
		if err := incrOnce(ctx, c, key, "op-1"); err != nil { // the caller's own retry
			t.Fatal(err)
		}
		if n, err := c.Get(ctx, key).Int(); err != nil || n != 1 {
			t.Fatalf("counted %d times (%v), want once", n, err)
		}
	})
}

// A host tests its own code against the failures the kit makes (here a lost reply, on a
// standalone server and a cluster); checkIncrOnce above is what its test file holds. The
// kit's own tests run it (TestTheExampleHoldsForItsCode).
func Example() {
	_ = checkIncrOnce
}

// A long test that loops runs forty rounds in a full run (CELEBRITY_FULL=1) and five
// otherwise, each round the same scenario with the same checks.
func ExampleRounds() {
	for round := range celebritytest.Rounds(40, 5) {
		_ = round // one round: break something, check the guarantee
	}
}

// A long test that runs each fault state on a standalone server and on a cluster runs, in
// quick mode, each state on one of them (alternating), and every state on both in a full run
// (CELEBRITY_FULL=1).
func ExampleSpread() {
	states := []string{"copying", "catching-up", "closed", "ready"}
	for k, topology := range []string{"standalone", "cluster"} {
		for i, state := range states {
			if !celebritytest.Spread(i, k, 2) {
				continue
			}
			_, _ = topology, state // break the driver at state on this topology, then check
		}
	}
}
