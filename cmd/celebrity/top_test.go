package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

// hammer reads one key in a loop until the test's work is done, making its master hot.
func hammer(t *testing.T, c redis.UniversalClient, key string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var done atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := c.Get(ctx, key).Err(); err == nil || err == redis.Nil {
					done.Add(1)
				}
			}
		}()
	}
	stop = func() { cancel(); wg.Wait() }
	// The load must be running before top samples it: on a loaded machine the first
	// connections and the cluster's slot map take a while.
	ok := assert.Eventually(t, func() bool { return done.Load() >= 200 }, 30*time.Second, 10*time.Millisecond, "the hammer reads the key")
	if !ok {
		stop()
		t.FailNow()
	}
	return stop
}

// TestTopFindsTheHotNode runs top against a 3-master cluster while one key is read in a
// loop: the key's master must be the busiest node and the skew well above even.
func TestTopFindsTheHotNode(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	c := cl.Client(t)
	key := celebritytest.Prefix(t) + "post:ronaldo"
	stop := hammer(t, c, key)
	defer stop()

	r := cli(t, "", nil, "top", "--once", "--json", "--interval", "500ms", "--cluster", cl.Addrs()[0])
	require.Equal(t, 0, r.code, r.stderr)
	f := decodeJSON[topFrame](t, r.stdout)
	require.Len(t, f.Nodes, 3)
	busiest := f.Nodes[0]
	for _, n := range f.Nodes {
		if n.OpsPerS > busiest.OpsPerS {
			busiest = n
		}
	}
	require.Equal(t, cl.MasterOf(key).Addr(), busiest.Addr, "the hot key's master is the busiest node: %+v", f.Nodes)
	require.Greater(t, f.Skew, 1.5, "one node carries most of the load: %+v", f.Nodes)
}

func TestTopOnStandaloneProbesObjectFreq(t *testing.T) {
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{Config: []string{"maxmemory-policy", "allkeys-lfu"}})
	c := s.Client(t)
	key := celebritytest.Prefix(t) + "k"
	require.NoError(t, c.Set(t.Context(), key, "v", 0).Err())
	stop := hammer(t, c, key)
	defer stop()
	r := cli(t, "", nil, "top", "--once", "--json", "--interval", "300ms", "--addr", s.Addr(), "--probe", key)
	require.Equal(t, 0, r.code, r.stderr)
	f := decodeJSON[topFrame](t, r.stdout)
	require.Len(t, f.Nodes, 1)
	require.Greater(t, f.Nodes[0].OpsPerS, 0.0)
	require.InDelta(t, 1.0, f.Skew, 1e-9, "one node is its own mean")
	require.Len(t, f.Probes, 1)
	require.Empty(t, f.Probes[0].Error)
	require.Greater(t, f.Probes[0].Freq, int64(0), "a key read in a loop has an LFU counter above zero")
}

// TestTopFrameRendering checks the frame as a person sees it.
func TestTopFrameRendering(t *testing.T) {
	f := topFrame{Interval: 1, Skew: 2.5, Nodes: []nodeRate{
		{Addr: "10.0.0.1:6379", OpsPerS: 9000}, {Addr: "10.0.0.2:6379", OpsPerS: 1800}, {Addr: "10.0.0.3:6379", OpsPerS: 0},
	}}
	want := "celebrity top — 3 node(s), 1.0s interval\n\n" +
		"10.0.0.1:6379               9000 ops/s  ██████████\n" +
		"10.0.0.2:6379               1800 ops/s  ██········\n" +
		"10.0.0.3:6379                  0 ops/s  ··········\n" +
		"\nskew (max/mean): 2.50  one node is carrying the load: look for a hot key\n"
	require.Equal(t, want, renderTop(f, 10))
}
