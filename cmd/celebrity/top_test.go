package main

import (
	"context"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
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
	key := celebritytest.NewPrefix(t) + "post:ronaldo"
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
	key := celebritytest.NewPrefix(t) + "k"
	require.NoError(t, c.Set(t.Context(), key, "v", 0).Err())
	for i := range 5 {
		require.NoError(t, c.Set(t.Context(), key+":cold:"+itoa(i), "v", 0).Err())
	}
	stop := hammer(t, c, key)
	defer stop()
	r := cli(t, "", nil, "top", "--once", "--json", "--interval", "300ms", "--addr", s.Addr(), "--probe-raw", key, "--scan", "1")
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

// TestTopProbesACacheKeyWhereTheCacheStoresIt probes logical keys of a live celebrity.Cache
// on a server with an LFU policy: top probes the record's key (celebrity.RecordKey), not a
// key of that name the Cache never wrote, and says which key it probed.
func TestTopProbesACacheKeyWhereTheCacheStoresIt(t *testing.T) {
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{Config: []string{"maxmemory-policy", "allkeys-lfu"}})
	p := celebritytest.NewPrefix(t)
	cache, err := celebrity.New(s.Client(t), func(context.Context, string) (celebrity.Versioned[[]byte], error) {
		return celebrity.Versioned[[]byte]{Value: []byte("v"), Version: 1}, nil
	}, celebrity.Options[[]byte]{Prefix: p, Loop: celebrity.LoopOptions{ReportInterval: -1}})
	require.NoError(t, err)
	defer cache.Close()
	_, err = cache.Get(t.Context(), "post:7")
	require.NoError(t, err)

	r := cli(t, "", nil, "top", "--once", "--interval", "100ms", "--addr", s.Addr(), "--cache-prefix", p, "--probe", "post:7,post:none")
	require.Equal(t, 0, r.code, r.stderr)
	stored, none := celebrity.RecordKey(p, "post:7"), celebrity.RecordKey(p, "post:none")
	require.Regexp(t, `\nOBJECT FREQ post:7 \(stored as `+regexp.QuoteMeta(stored)+`\): \d+\n`, r.stdout)
	require.Contains(t, r.stdout, "\nOBJECT FREQ post:none (stored as "+none+"): no such key\n")

	r = cli(t, "", nil, "top", "--once", "--json", "--interval", "100ms", "--addr", s.Addr(), "--cache-prefix", p, "--probe", "post:7")
	require.Equal(t, 0, r.code, r.stderr)
	f := decodeJSON[topFrame](t, r.stdout)
	require.Equal(t, []probeFreq{{Key: "post:7", Stored: stored, Freq: f.Probes[0].Freq}}, f.Probes)
	require.Positive(t, f.Probes[0].Freq, "the record was read: its LFU counter is above zero")
}

// TestTopRefusesBadFlags checks each refusal's exact message and exit code 2, before any
// connection.
func TestTopRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--probe", "post:7", "--cache-prefix", ""}, `celebrity: --probe names logical keys of the Cache under --cache-prefix, which is ""; give --probe-raw for Redis keys` + "\n"},
		{[]string{"--report-interval", "0s"}, "celebrity: --report-interval must be 1ms..1h and --summary-shards 1..1024 (the fleet's options), got 0s and 4\n"},
		{[]string{"--summary-shards", "0"}, "celebrity: --report-interval must be 1ms..1h and --summary-shards 1..1024 (the fleet's options), got 1s and 0\n"},
		{[]string{"--demoted", "-1s"}, "celebrity: --demoted must be 0..24h, got -1s\n"},
		{[]string{"--cache-prefix", "a{b}"}, `celebrity: --cache-prefix must be 1..128 bytes without '{' or '}', got "a{b}"` + "\n"},
	} {
		r := cli(t, "", nil, append([]string{"top", "--once", "--addr", "127.0.0.1:1"}, tc.args...)...)
		require.Equal(t, 2, r.code, "%v: %s", tc.args, r.stderr)
		require.Equal(t, tc.want, r.stderr, "%v", tc.args)
		require.Empty(t, r.stdout)
	}
}
