package main

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestTopShowsTheFleetHotSet runs two celebrity.Cache instances on a 3-master cluster, one key
// read in a loop until the fleet promotes it and one promoted by hand, and checks that top
// shows both in the hot set with the leader that decided it. Only L1 misses reach Redis and
// count, so Fresh is short: two readers make up to 2/Fresh = 400 Redis-level reads per second,
// four times PromoteRate (at Fresh 20 ms they made at most exactly PromoteRate, and a slow
// machine never reached it).
func TestTopShowsTheFleetHotSet(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	p := celebritytest.NewPrefix(t)
	hot, launch := p+"post:ronaldo", p+"post:launch"
	load := func(_ context.Context, key string) (celebrity.Versioned[string], error) {
		return celebrity.Versioned[string]{Value: "v1", Version: 1}, nil
	}
	var caches []*celebrity.Cache[string]
	for _, id := range []string{"inst-0", "inst-1"} {
		c, err := celebrity.New(cl.Client(t), load, celebrity.Options[string]{
			Prefix: p, InstanceID: id, Fresh: 5 * time.Millisecond, Stale: -1,
			Loop: celebrity.LoopOptions{
				ReportInterval: 100 * time.Millisecond, PromoteRate: 100, DemoteRate: 10, Hold: time.Hour,
				SummaryShards: 4, ReportMinRate: 5,
			},
		})
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.Ready(t.Context()))
		caches = append(caches, c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, c := range caches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, _ = c.Get(ctx, hot)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	require.NoError(t, caches[0].Promote(t.Context(), launch))
	// Each instance reads a newly promoted key once (its refresh-ahead warms it): the launch
	// key's only Redis reads. The rates checked below are of intervals that start after them.
	require.Eventually(t, func() bool {
		for _, c := range caches {
			if !slices.Contains(c.Hot(), launch) || c.Stats().Refreshes == 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, time.Millisecond, "every instance applies the launch and refreshes it once")
	warmed := time.Now()
	require.Eventually(t, func() bool {
		for _, c := range caches {
			if len(c.Hot()) != 2 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "the fleet promotes the key read in a loop")

	var f topFrame
	require.Eventually(t, func() bool {
		r := cli(t, "", nil, "top", "--once", "--json", "--interval", "100ms", "--cluster", cl.Addrs()[0], "--cache-prefix", p,
			"--report-interval", "100ms", "--summary-shards", "4")
		require.Equal(t, 0, r.code, r.stderr)
		f = decodeJSON[topFrame](t, r.stdout)
		if f.HotSet == nil || f.HotSet.Leader == "" || len(f.HotSet.Members) != 2 || f.HotSet.RatesFrom.Before(warmed) {
			return false
		}
		for _, m := range f.HotSet.Members {
			if m.Key == hot && m.NowRate <= 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "a leader holds the lease while the loop runs, and the readers' rate shows now")
	hs := f.HotSet
	require.False(t, hs.Absent)
	require.Contains(t, []string{"inst-0", "inst-1"}, hs.Leader)
	require.Positive(t, hs.LeaseMs)
	require.GreaterOrEqual(t, hs.Version, uint64(2), "two changes: a promotion by hand and one by the fleet")
	byKey := map[string]hotMember{}
	for _, m := range hs.Members {
		byKey[m.Key] = m
	}
	require.True(t, byKey[launch].Manual)
	require.False(t, byKey[hot].Manual)
	require.GreaterOrEqual(t, byKey[hot].Rate, 100.0, "the fleet-wide rate that decided the promotion")
	require.False(t, byKey[hot].Decided.IsZero())
	require.Zero(t, byKey[launch].NowRate, "nobody reads the launch key after its one refresh")
	require.Empty(t, hs.RatesError)
	require.Equal(t, "100ms", hs.RatesInterval)
	require.WithinDuration(t, time.Now(), hs.RatesFrom, 10*time.Second, "the last complete interval")

	// A prefix no fleet uses shows that there is no hot set, rather than an empty one.
	r := cli(t, "", nil, "top", "--once", "--interval", "100ms", "--cluster", cl.Addrs()[0], "--cache-prefix", p+"other:")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "fleet hot set ("+p+"other:): none")
	r = cli(t, "", nil, "top", "--once", "--cluster", cl.Addrs()[0], "--cache-prefix", "a{b}")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "--cache-prefix must be")
}

// TestTopFrameWithHotSetRendering checks the hot set as a person sees it under the node bars.
func TestTopFrameWithHotSetRendering(t *testing.T) {
	at := time.Date(2026, 1, 2, 21, 50, 1, 0, time.UTC)
	f := topFrame{Interval: 1, Skew: 1.1, Nodes: []nodeRate{{Addr: "10.0.0.1:6379", OpsPerS: 100}, {Addr: "10.0.0.2:6379", OpsPerS: 90}},
		HotSet: &hotSet{Prefix: "celebrity:cache:", Version: 7, Epoch: 3, Leader: "api-7", LeaseMs: 2100,
			Members: []hotMember{{Key: "post:ronaldo", Rate: 15234.5, NowRate: 9120, Decided: at}, {Key: "post:launch", Manual: true, Decided: at}},
			Demoted: []hotMember{{Key: "post:old", Rate: 3, Decided: at.Add(time.Minute)}}, DemotedWithin: "1m0s",
			RatesFrom: at.Add(2 * time.Minute), RatesInterval: "1s"}}
	want := "celebrity top — 2 node(s), 1.0s interval\n\n" +
		"10.0.0.1:6379                100 ops/s  ██████████\n" +
		"10.0.0.2:6379                 90 ops/s  █████████·\n" +
		"\nskew (max/mean): 1.10  even\n" +
		"\nfleet hot set (celebrity:cache:): version 7, 2 key(s), leader api-7 (epoch 3, lease 2.1s left)\n" +
		"  KEY                              BY       AT DECISION          NOW  SINCE\n" +
		"  post:ronaldo                     fleet        15234.5       9120.0  21:50:01\n" +
		"  post:launch                      manual           0.0          0.0  21:50:01\n" +
		"  demoted in the last 1m0s:\n" +
		"  post:old                         demoted          3.0          0.0  21:51:01\n" +
		"  rates: Redis-level reads/s (L1 misses) the instances report, summed over the fleet; rate now: fleet reads/s in the report interval from 21:52:01\n"
	got := renderTop(f, 10)
	require.Equal(t, want, got, "got:\n%s", strings.ReplaceAll(got, " ", "."))

	f.HotSet.RatesError = "celebrity: read the fleet's rates: i/o timeout"
	f.HotSet.Demoted = nil
	got = renderTop(f, 10)
	require.Contains(t, got, "  post:ronaldo                     fleet        15234.5            ?  21:50:01\n")
	require.Contains(t, got, "rate now unknown: celebrity: read the fleet's rates: i/o timeout\n")
	require.NotContains(t, got, "demoted")
}
