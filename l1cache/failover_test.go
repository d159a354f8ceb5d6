package l1cache

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestInvalidatorFollowsAFailoverOfItsMaster fails over the master that holds the
// subscription, on a 3-master cluster with one replica per master. The host's clients reload
// their slot map only once an hour: the Invalidator must re-subscribe on the promoted
// replica on its own, within a small multiple of the node timeout (3s here), and while it
// is down the cache must not serve entries as fresh.
func TestInvalidatorFollowsAFailoverOfItsMaster(t *testing.T) {
	celebritytest.Long(t)
	for _, tc := range []struct {
		name string
		fail func(cl *celebritytest.Cluster, master *celebritytest.Server, i int)
	}{
		{"killed", func(cl *celebritytest.Cluster, master *celebritytest.Server, i int) {
			master.Kill()
			cl.ForceFailover(t, i)
		}},
		{"manual", func(cl *celebritytest.Cluster, _ *celebritytest.Server, i int) { cl.Failover(t, i) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Replicas: true})
			client := func() Client {
				return cl.Client(t, func(o *redis.ClusterOptions) { o.ClusterStateReloadInterval = time.Hour })
			}
			channel := celebritytest.NewPrefix(t) + "inv"
			src := newSource()
			src.set("k", "v1")
			a := newInstance(t, client(), src, channel, Options[string]{Fresh: time.Hour})
			b := newInstance(t, client(), src, channel, Options[string]{Fresh: time.Hour})
			require.True(t, a.inv.Stats().Sharded, "a cluster client uses sharded pub/sub")
			require.Equal(t, "v1", get(t, a.cache, "k"))
			before := a.inv.Stats()

			master := cl.MasterOf(channel)
			i := -1
			for j, m := range cl.Masters() {
				if m == master {
					i = j
				}
			}
			require.NotEqual(t, -1, i)
			tc.fail(cl, master, i)

			// Every invalidation published after the failover reaches a once its
			// subscription lives on the new owner of the channel's slot (the publisher's
			// first attempts may fail while its own slot map is reloaded).
			ctx := context.Background()
			for round := range 3 {
				src.set("k", "v"+string(rune('2'+round)))
				received := a.inv.Stats().Received
				require.Eventually(t, func() bool {
					if b.inv.Invalidate(ctx, "k") != nil {
						return false
					}
					return a.inv.Stats().Received > received
				}, 20*time.Second, 50*time.Millisecond, "a got no invalidation: %+v", a.inv.Stats())
				require.Equal(t, "v"+string(rune('2'+round)), get(t, a.cache, "k"))
			}
			s := a.inv.Stats()
			require.True(t, s.Subscribed)
			if s.Losses > before.Losses {
				require.Greater(t, s.OfflineMarks, before.OfflineMarks, "a lost subscription marks the cache stale at once")
				require.Greater(t, s.Subscriptions, before.Subscriptions)
			}
		})
	}
}
