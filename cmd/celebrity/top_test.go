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

// capsJSON is the part of top's --json frame that says what each node offers, with the
// snake_case keys the CLI writes.
type capsJSON struct {
	Capabilities []struct {
		Policy     string `json:"policy"`
		ObjectFreq bool   `json:"object_freq"`
	} `json:"capabilities"`
}

// TestTopFindsTheHotNode runs top against a 3-master cluster while one key is read in a
// loop: the key's master must be the busiest node and the skew well above even.
func TestTopFindsTheHotNode(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	c := cl.Client(t)
	key := celebritytest.Prefix(t) + "post:ronaldo"
	// A key to SCAN: on a cluster with no key at all, --scan would probe nothing.
	require.NoError(t, c.Set(t.Context(), key, "v", 0).Err())
	stop := hammer(t, c, key)
	defer stop()

	r := cli(t, "", nil, "top", "--once", "--json", "--interval", "500ms", "--cluster", cl.Addrs()[0], "--scan", "3")
	require.Equal(t, 0, r.code, r.stderr)
	f := decodeJSON[topFrame](t, r.stdout)
	require.Len(t, f.Nodes, 3)
	caps := decodeJSON[capsJSON](t, r.stdout).Capabilities
	require.Len(t, caps, 3, "every master says what it offers: %s", f.CapabilitiesError)
	for _, c := range caps {
		require.Equal(t, "noeviction", c.Policy)
		require.False(t, c.ObjectFreq, "no LFU policy on this cluster: %+v", c)
	}
	require.Empty(t, f.TopKeys)
	require.Contains(t, f.TopKeysError, "LFU", "--scan says why it found nothing rather than failing the frame")
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
	for i := range 5 {
		require.NoError(t, c.Set(t.Context(), key+":cold:"+itoa(i), "v", 0).Err())
	}
	stop := hammer(t, c, key)
	defer stop()
	r := cli(t, "", nil, "top", "--once", "--json", "--interval", "300ms", "--addr", s.Addr(), "--probe", key, "--scan", "1")
	require.Equal(t, 0, r.code, r.stderr)
	f := decodeJSON[topFrame](t, r.stdout)
	require.Len(t, f.Nodes, 1)
	require.Greater(t, f.Nodes[0].OpsPerS, 0.0)
	require.InDelta(t, 1.0, f.Skew, 1e-9, "one node is its own mean")
	require.Len(t, f.Probes, 1)
	require.Empty(t, f.Probes[0].Error)
	require.Greater(t, f.Probes[0].Freq, int64(0), "a key read in a loop has an LFU counter above zero")
	caps := decodeJSON[capsJSON](t, r.stdout).Capabilities
	require.Len(t, caps, 1)
	require.True(t, caps[0].ObjectFreq)
	require.Equal(t, "allkeys-lfu", caps[0].Policy)
	require.Len(t, f.TopKeys, 1, f.TopKeysError)
	require.Equal(t, key, f.TopKeys[0].Key, "the key read in a loop is the hottest the SCAN finds")
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
