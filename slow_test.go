package celebrity_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// slowFleet is the slow lane's test fleet: instances that each read one key under
// ReportMinRate, so that only the fleet's sum crosses PromoteRate. A reader waits 60 ms
// between reads and reaches Redis at most once per read (Fresh 5 ms), so an instance's
// reading over the regular lane's window (half an interval, 50 ms) holds one read at most:
// at most 27 reads a second against ReportMinRate 40. Ten instances make up to about 160
// a second, over three times PromoteRate (50).
func slowFleet(t *testing.T, every int) (caches []*celebrity.Cache[string], recs []*recorder, key string, leader *celebrity.Cache[string]) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key = p + "lukewarm"
	src.bump(key)
	recs = make([]*recorder, 10)
	for i := range recs {
		recs[i] = &recorder{}
		o := loopOptions()
		o.Fresh, o.Loop.ReportMinRate, o.Loop.PromoteRate, o.Loop.DemoteRate = 5*time.Millisecond, 40, 50, 10
		o.Loop.SlowReportEvery = every
		o.OnEvent = recs[i].add
		caches = append(caches, newCache(t, srv.Client(t), src, p, o))
	}
	leader = waitLeader(t, caches)
	// Readers start once every detector is older than its window (a young detector's
	// rates are taken over less time).
	waitHeartbeats(t, leader, 2)
	return caches, recs, key, leader
}

// pacedReaders reads key from every cache, one read per 60 ms, until stop is called.
func pacedReaders(t *testing.T, caches []*celebrity.Cache[string], key string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range caches {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := c.Get(ctx, key); err != nil && ctx.Err() == nil {
					t.Errorf("Get %q: %v", key, err)
				}
				time.Sleep(60 * time.Millisecond)
			}
		})
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// TestSlowLaneFindsAKeyHotOnlyInTheFleetsSum: ten instances each read one key under
// ReportMinRate while the fleet's sum is over PromoteRate. Without the slow lane no instance
// reports it (no report at all) and it is never promoted; with SlowReportEvery it is
// promoted on every instance at a fleet-wide rate over PromoteRate, each instance sends one
// report per SlowReportEvery intervals, and the key is demoted once the reads stop.
func TestSlowLaneFindsAKeyHotOnlyInTheFleetsSum(t *testing.T) {
	celebritytest.Long(t)
	t.Run("off", func(t *testing.T) {
		caches, _, key, leader := slowFleet(t, 0)
		stop := pacedReaders(t, caches, key)
		waitHeartbeats(t, leader, 20)
		stop()
		require.True(t, hotEverywhere(caches, key, false), "no instance sees it: not promoted")
		for i, c := range caches {
			require.Zero(t, c.Stats().Reports, "instance %d: nothing at or above ReportMinRate, no report", i)
		}
	})
	t.Run("on", func(t *testing.T) {
		const every = 4
		caches, recs, key, leader := slowFleet(t, every)
		stop := pacedReaders(t, caches, key)
		require.Eventually(t, func() bool { return hotEverywhere(caches, key, true) }, 30*time.Second, 10*time.Millisecond)
		for i, r := range recs {
			n, ev := r.count(celebrity.EventPromoted, key)
			require.Equal(t, 1, n, "instance %d", i)
			require.GreaterOrEqual(t, ev.Rate, 50.0, "the fleet-wide rate that decided it")
			require.False(t, ev.Manual)
		}

		// The cost: one report per instance per SlowReportEvery intervals (the key stays
		// lukewarm on every instance, so no regular report), counted over whole intervals.
		iv := 100 * time.Millisecond
		before := make([]uint64, len(caches))
		for i, c := range caches {
			before[i] = c.Stats().Reports
		}
		from := time.Now().UnixNano() / int64(iv)
		waitHeartbeats(t, leader, 20)
		to := time.Now().UnixNano()/int64(iv) + 1
		for i, c := range caches {
			n := c.Stats().Reports - before[i]
			require.LessOrEqual(t, n, uint64((to-from)/every+1), "instance %d: reports in %d intervals", i, to-from)
			require.NotZero(t, n, "instance %d: %+v", i, c.Stats())
		}
		require.True(t, hotEverywhere(caches, key, true), "still read: still hot (no flap)")

		stop()
		require.Eventually(t, func() bool { return hotEverywhere(caches, key, false) }, 30*time.Second, 10*time.Millisecond)
		for i, r := range recs {
			n, ev := r.count(celebrity.EventDemoted, key)
			require.Equal(t, 1, n, "instance %d", i)
			require.Less(t, ev.Rate, 10.0)
			n, _ = r.count(celebrity.EventPromoted, key)
			require.Equal(t, 1, n, "instance %d: no flap", i)
		}
	})
}

func TestSlowReportEveryOutOfRange(t *testing.T) {
	srv := celebritytest.Standalone(t)
	for _, n := range []int{-1, 1, 61} {
		_, err := celebrity.New(srv.Client(t), newSource().load, celebrity.Options[string]{
			Loop: celebrity.LoopOptions{SlowReportEvery: n}})
		require.ErrorIs(t, err, celebrity.ErrInvalid)
		require.ErrorContains(t, err, "SlowReportEvery")
	}
	for _, n := range []int{2, 60} {
		c, err := celebrity.New(srv.Client(t), newSource().load, celebrity.Options[string]{
			Loop: celebrity.LoopOptions{SlowReportEvery: n}})
		require.NoError(t, err, "the bounds themselves are accepted")
		require.NoError(t, c.Close())
	}
}
