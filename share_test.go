package celebrity_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestPromoteByShareOfNodeLoad: two keys read at the same fleet-wide rate, far under
// PromoteRate; one is alone on its master, the other shares its master with heavy traffic.
// With PromoteShare the fleet promotes the key that takes most of its node's load and leaves
// the other alone, and demotes the first once its reads stop.
func TestPromoteByShareOfNodeLoad(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	p := celebritytest.NewPrefix(t)
	ms := cl.Masters()
	keyOn := func(m *celebritytest.Server, name string) string {
		for i := 0; ; i++ {
			if k := p + name + strconv.Itoa(i); cl.MasterOf(k) == m {
				return k
			}
		}
	}
	alone, crowded, noise := keyOn(ms[0], "alone"), keyOn(ms[1], "crowded"), keyOn(ms[1], "noise")
	src := newSource()
	src.bump(alone)
	src.bump(crowded)

	// Heavy traffic on the crowded key's master, from outside the cache.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	busy := ms[1].AdminClient(t) // traffic from outside the cache, outside its rule
	wg.Go(func() {
		for ctx.Err() == nil {
			pipe := busy.Pipeline()
			for range 100 {
				pipe.Get(ctx, noise)
			}
			_, _ = pipe.Exec(ctx)
			time.Sleep(5 * time.Millisecond)
		}
	})

	var caches []*celebrity.Cache[string]
	recs := make([]*recorder, 3)
	for i := range recs {
		recs[i] = &recorder{}
		o := loopOptions()
		o.Loop.PromoteRate, o.Loop.DemoteRate, o.Loop.ShareMinRate, o.Loop.PromoteShare = 1e6, 5, 20, 0.25
		o.OnEvent = recs[i].add
		caches = append(caches, newCache(t, cl.Client(t), src, p, o))
	}
	stop := readers(t, caches, alone, crowded)
	require.Eventually(t, func() bool { return hotEverywhere(caches, alone, true) }, 30*time.Second, 10*time.Millisecond)
	for i, r := range recs {
		n, ev := r.count(celebrity.EventPromoted, alone)
		require.Equal(t, 1, n, "instance %d", i)
		require.GreaterOrEqual(t, ev.Rate, 20.0, "at least ShareMinRate")
		require.Less(t, ev.Rate, 1e6, "under PromoteRate: promoted by its share")
	}
	// The leader evaluated both keys in the same intervals; keep reading a few more.
	var leader *celebrity.Cache[string]
	for _, c := range caches {
		if c.Stats().Leader {
			leader = c
		}
	}
	require.NotNil(t, leader)
	waitHeartbeats(t, leader, 5)
	require.True(t, hotEverywhere(caches, crowded, false), "a small share of a busy node is not promoted")

	stop()
	require.Eventually(t, func() bool { return hotEverywhere(caches, alone, false) }, 30*time.Second, 10*time.Millisecond)
}
