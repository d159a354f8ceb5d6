package celebrity_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/slot"
)

// turnFleet is the sampling's test fleet: 12 instances with ReportsPerInterval 3, so that
// once the leader counts them (and publishes their number) each reports once every 4
// intervals. They poll once a minute: the size reaches them by the leader's announcement.
// Every instance reads a background key once per 60 ms: about 200 Redis-level reads a second
// in the fleet's sum, a quarter of PromoteRate (800). An instance's detector sees at most one
// of those reads in its window (3/8 to 1/2 interval), about 27 a second at most, so even the
// most uneven turns (the leader scales the reporters' mean to the fleet's size, 12 and some
// noise) keep the background key's estimate under 450.
func turnFleet(t *testing.T, client func(testing.TB) redis.UniversalClient) (caches []*celebrity.Cache[string], recs []*recorder, p string, leader *celebrity.Cache[string]) {
	p = celebritytest.NewPrefix(t)
	src := newSource()
	for _, k := range []string{"background", "celebrity"} {
		src.bump(p + k)
	}
	recs = make([]*recorder, 12)
	for i := range recs {
		recs[i] = &recorder{}
		o := loopOptions()
		o.Fresh, o.Loop.ReportMinRate, o.Loop.PromoteRate, o.Loop.DemoteRate = 5*time.Millisecond, 0, 800, 200
		o.Loop.ReportsPerInterval, o.Loop.PollInterval = 3, time.Minute
		o.OnEvent = recs[i].add
		caches = append(caches, newCache(t, client(t), src, p, o))
	}
	leader = waitLeader(t, caches)
	return caches, recs, p, leader
}

// everyReaders reads key from every cache, one read per gap, until stop is called.
func everyReaders(t *testing.T, caches []*celebrity.Cache[string], key string, gap time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range caches {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := c.Get(ctx, key); err != nil && ctx.Err() == nil {
					t.Errorf("Get %q: %v", key, err)
				}
				time.Sleep(gap)
			}
		})
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// TestALargeFleetReportsInTurns: once the leader has counted the fleet (12 instances,
// ReportsPerInterval 3), each instance makes its regular report once every few intervals,
// with its rates scaled. A celebrity that every instance reads under PromoteRate/K (so no
// instance reports it every interval) but the fleet reads over PromoteRate is promoted on
// every instance from the sampled reports, stays hot while read (no flap), and is demoted
// after its reads stop; the background key, under PromoteRate in the fleet's sum, never is.
// The reports in the meantime are at most half of one per instance per interval.
func TestALargeFleetReportsInTurns(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		srv := celebritytest.Standalone(t)
		testReportsInTurns(t, func(tb testing.TB) redis.UniversalClient { return srv.Client(tb) })
	})
	t.Run("cluster", func(t *testing.T) {
		celebritytest.Long(t)
		cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{})
		testReportsInTurns(t, func(tb testing.TB) redis.UniversalClient { return cl.Client(tb) })
	})
}

func testReportsInTurns(t *testing.T, client func(testing.TB) redis.UniversalClient) {
	caches, recs, p, leader := turnFleet(t, client)
	stopBackground := everyReaders(t, caches, p+"background", 60*time.Millisecond)
	defer stopBackground()
	require.Eventually(t, func() bool {
		for _, c := range caches {
			if celebrity.FleetSizeOf(c) < 7 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every instance hears the fleet's size (12 reading) from the leader, a minute before its next poll")

	celeb := p + "celebrity"
	// About 100 Redis-level reads a second per instance (1,200 in the fleet's sum), under
	// PromoteRate/K (200): every instance reports it only on its turn.
	stop := everyReaders(t, caches, celeb, 10*time.Millisecond)
	require.Eventually(t, func() bool { return hotEverywhere(caches, celeb, true) }, 30*time.Second, 10*time.Millisecond)
	for i, r := range recs {
		n, ev := r.count(celebrity.EventPromoted, celeb)
		require.Equal(t, 1, n, "instance %d", i)
		require.GreaterOrEqual(t, ev.Rate, 800.0, "the fleet-wide rate that decided it")
	}

	iv := 100 * time.Millisecond
	var before uint64
	for _, c := range caches {
		before += c.Stats().Reports
	}
	from := time.Now().UnixNano() / int64(iv)
	waitHeartbeats(t, leader, 20)
	to := time.Now().UnixNano()/int64(iv) + 1
	var reports uint64
	for _, c := range caches {
		reports += c.Stats().Reports
	}
	reports -= before
	every := uint64(len(caches)) * uint64(to-from)
	t.Logf("%d reports in %d intervals of %d instances (%d with a report every interval)", reports, to-from, len(caches), every)
	require.LessOrEqual(t, reports, every/2, "instances report in turns")
	require.NotZero(t, reports)
	require.True(t, hotEverywhere(caches, celeb, true), "still read: still hot (no flap)")

	stop()
	require.Eventually(t, func() bool { return hotEverywhere(caches, celeb, false) }, 30*time.Second, 10*time.Millisecond)
	for i, r := range recs {
		n, _ := r.count(celebrity.EventPromoted, celeb)
		require.Equal(t, 1, n, "instance %d: no flap", i)
		n, _ = r.count(celebrity.EventPromoted, p+"background")
		require.Zero(t, n, "instance %d: the background key stays under PromoteRate", i)
	}
}

// TestSummaryShardsSpreadOverTheSlots: each summary shard's slot lies in its own part of the
// slot space, so on a 3-master cluster 3 or more shards land on every master, whatever the
// prefix; the names are the same on every instance.
func TestSummaryShardsSpreadOverTheSlots(t *testing.T) {
	for _, shards := range []int{1, 2, 3, 4, 16, 1024} {
		for i := range max(2, 50*4/shards) {
			prefix := fmt.Sprintf("app%d:", i)
			tags := celebrity.SummaryTags(prefix, shards)
			require.Equal(t, tags, celebrity.SummaryTags(prefix, shards), "deterministic")
			masters := map[int]bool{}
			for s, tag := range tags {
				sl := int(slot.Of(tag + ":1"))
				center := (2*s + 1) * slot.Count / (2 * shards)
				require.InDelta(t, center, sl, float64(celebrity.SumSlotWidth(shards)), "shard %d of %d under %q", s, shards, prefix)
				masters[sl*3/slot.Count] = true
			}
			if shards >= 3 {
				require.Len(t, masters, 3, "%d shards under %q cover the 3 masters' even ranges", shards, prefix)
			}
		}
	}
	t.Run("cluster", func(t *testing.T) {
		cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{})
		masters := map[string]bool{}
		for _, tag := range celebrity.SummaryTags(celebrity.DefaultPrefix, celebrity.DefaultSummaryShards) {
			masters[cl.MasterOf(tag+":1").Addr()] = true
		}
		require.Len(t, masters, 3, "the default shards are on every master")
	})
}
