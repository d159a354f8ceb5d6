package stripes

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Three families on their own clients (three processes' worth) write one name at 40 events a
// second each, under HotRate 100: no process alone is hot, the fleet's sum (120/s) is. The
// name is promoted to HotStripes on every family, from the fleet's count of its writes,
// which takes each write once although one family loses a report's reply every round and
// go-redis sends it again. Another name written at 30 a second by each (90/s in all) stays
// at one stripe. Once the writes stop, the name is demoted after CoolAfter. Every Sum is
// exact throughout. The families' clock is the test's, so rates are what the test wrote.
func TestFamilyPromotesANameHotOnlyInTheFleetsSum(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "standalone", true: "cluster"}[cluster], func(t *testing.T) {
			ctx := context.Background()
			var now atomic.Int64
			now.Store((time.Now().UnixMilli()/1000 + 1) * int64(time.Second)) // on a window's start
			clock := func() time.Time { return time.Unix(0, now.Load()) }
			o := FamilyOptions{Counter: Options{Prefix: celebritytest.NewPrefix(t), Clock: clock}, Interval: -1, MaxStaleness: -1,
				HotStripes: 4, HotRate: 100, CoolAfter: 3 * time.Second}
			var fams [3]*Family
			var inj *faults.Injector
			var admin redis.UniversalClient
			for i := range fams {
				var rc redis.UniversalClient
				var dialer func(context.Context, string, string) (net.Conn, error)
				if i == 0 {
					inj = faults.New()
					dialer = inj.Dialer(nil)
				}
				if cluster {
					rc = celebritytest.SharedCluster(t).Client(t, func(co *redis.ClusterOptions) { co.Dialer = dialer })
				} else {
					rc = celebritytest.Standalone(t).Client(t, func(co *redis.Options) { co.Dialer = dialer })
				}
				fams[i] = newFamily(t, rc, o)
				admin = rc
			}
			events := 0
			write := func(name string, perFamily int) {
				for _, f := range fams {
					for range perFamily {
						events++
						_, err := f.Add(ctx, name, Event{ID: strconv.Itoa(events), Time: time.Now()}, 1)
						require.NoError(t, err)
					}
				}
			}
			round := func() {
				now.Add(int64(time.Second))
				for _, f := range fams {
					require.NoError(t, f.Tick(ctx))
				}
			}
			for r := range 3 {
				write("viral", 40)
				write("calm", 30)
				inj.DropReply(faults.Match{Command: "EVALSHA", Arg: ":rate:"}, 1)
				round()
				// Every family's report of this round landed in the window of the round's
				// clock, each once.
				m, err := fams[0].member("viral")
				require.NoError(t, err)
				got, err := admin.HGet(ctx, m.c.keys.rate(1000), "w:"+strconv.FormatInt(now.Load()/int64(time.Second), 10)).Int64()
				require.NoError(t, err)
				require.Equal(t, int64(120), got, "round %d: the fleet's count of the round's writes", r)
			}
			require.Positive(t, inj.Dropped(), "a report's reply was lost")
			for i, f := range fams {
				require.Equal(t, 4, stripesOf(t, f, "viral"), "family %d: the name hot in the fleet's sum", i)
				require.Equal(t, 1, stripesOf(t, f, "calm"), "family %d: 90 writes/s in all stay under HotRate", i)
				// The family's next write goes to the new generation.
				_, err := f.Add(ctx, "viral", Event{ID: fmt.Sprintf("after-%d", i), Time: time.Now()}, 1)
				require.NoError(t, err)
				events++
				m, err := f.member("viral")
				require.NoError(t, err)
				require.Equal(t, 4, m.c.layout.Load().current().Stripes, "family %d writes to the promoted generation", i)
			}
			demoted := -1
			for r := range 10 {
				round()
				if stripesOf(t, fams[0], "viral") == 1 {
					demoted = r
					break
				}
			}
			require.GreaterOrEqual(t, demoted, 2, "demoted after CoolAfter (3s of the test's clock) of cool windows, not before")
			for _, f := range fams {
				require.Equal(t, int64(3*3*40+3), mustFamilySum(t, f, "viral"))
				require.Equal(t, int64(3*3*30), mustFamilySum(t, f, "calm"))
			}
			t.Logf("demoted %d rounds after the writes stopped; %d report replies lost", demoted+1, inj.Dropped())
		})
	}
}
