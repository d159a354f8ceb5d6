package stripes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
)

// retryNeverCounts asserts that a later attempt of an event that was counted once does not
// count it again: it is a duplicate, or too old to tell.
func retryNeverCounts(t *testing.T, c *Counter, ev Event, when string) {
	t.Helper()
	res, err := c.Add(context.Background(), ev, 1)
	if errors.Is(err, ErrTooOld) {
		return
	}
	require.NoError(t, err, when)
	require.False(t, res.Applied, "%s: a retry of an event already counted was counted again", when)
}

// waitPast blocks until the local clock (the servers' clock: they run on this machine) is
// past at.
func waitPast(t *testing.T, at time.Time) {
	t.Helper()
	require.Eventually(t, func() bool { return time.Now().After(at) }, 30*time.Second, 5*time.Millisecond)
}

// Two writers on separate clients add the same events at the same moment: every event is
// counted once in all, whichever writer wins, and the sum is the number of events.
func TestSameEventFromTwoCountersAtOnce(t *testing.T) {
	both(t, func(t *testing.T, rc redis.UniversalClient) {
		var other redis.UniversalClient
		if _, ok := rc.(*redis.ClusterClient); ok {
			other = celebritytest.SharedCluster(t).Client(t)
		} else {
			other = celebritytest.Standalone(t).Client(t)
		}
		prefix := celebritytest.NewPrefix(t)
		a := newCounter(t, rc, Options{Prefix: prefix, Stripes: 3})
		b := newCounter(t, other, Options{Prefix: prefix, Stripes: 3})
		ctx := context.Background()
		const n = 150
		var applied atomic.Int64
		now := time.Now()
		for i := range n {
			ev := Event{ID: id(i), Time: now}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, c := range []*Counter{a, b, a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res, err := c.Add(ctx, ev, 1)
					if err == nil && res.Applied {
						applied.Add(1)
					}
					require.NoError(t, err)
				}()
			}
			close(start)
			wg.Wait()
		}
		require.Equal(t, int64(n), applied.Load(), "events counted (Applied) across both writers")
		require.Equal(t, int64(n), mustSum(t, a))
		require.Equal(t, int64(n), mustSum(t, b))
	})
}

// An attempt whose reply is lost (the script ran) is retried at every moment until its
// records are gone: in its slice, after the slice rotated, past the window, and past the
// records' expiry. Other events keep the slice open so the retries take the fast path while
// it lasts. The event is never counted a second time.
func TestLostReplyRetriedAcrossSlices(t *testing.T) {
	celebritytest.Long(t)
	bothWithFaults(t, -1, func(t *testing.T, rc redis.UniversalClient, inj *faults.Injector) {
		const window, slices = 800 * time.Millisecond, 4
		sl := window / slices
		c := newCounter(t, rc, Options{Stripes: 1, DedupWindow: window, DedupSlices: slices})
		ctx := context.Background()
		// The layout exists before the event is stamped, so that creating it cannot take a
		// loaded machine's share of the window.
		_, err := c.ensureLayout(ctx)
		require.NoError(t, err)
		ev := Event{ID: "lost-reply", Time: time.Now()}
		// Open the event's slice in the stripe first, so the lost attempt is a fast-path one.
		_, err = c.Add(ctx, Event{ID: "opener", Time: ev.Time}, 1)
		require.NoError(t, err)
		inj.DropReply(faults.Match{Command: "EVALSHA"}, 1)
		_, err = c.Add(ctx, ev, 1)
		require.Error(t, err, "the reply was dropped")
		require.EqualValues(t, 1, inj.Dropped())
		require.Equal(t, int64(2), mustSum(t, c), "the lost attempt counted")

		start := ev.Time.Truncate(sl)
		keepers := int64(0)
		retryNeverCounts(t, c, ev, "same slice")
		for k, at := range []time.Time{
			start.Add(sl),                   // the next slice
			start.Add(2 * sl),               // two slices later
			ev.Time.Add(window),             // the window has passed
			start.Add(sl + window),          // the slice's end plus one window
			start.Add(sl + window + sl),     // the records' expiry
			start.Add(sl + window + 3*sl),   // well past it
			start.Add(sl + 2*window + 3*sl), // the ring position may be reused
		} {
			waitPast(t, at.Add(5*time.Millisecond))
			// A fresh event of the old slice (when still accepted) keeps its records
			// alive for the fast path; it must not disturb the retried one.
			res, err := c.Add(ctx, Event{ID: "keeper-" + id(k), Time: ev.Time}, 1)
			if !errors.Is(err, ErrTooOld) {
				require.NoError(t, err)
				require.True(t, res.Applied, "a new event counted")
				keepers++
			}
			retryNeverCounts(t, c, ev, "retry "+at.Sub(start).String()+" after the slice began")
		}
		require.Equal(t, 2+keepers, mustSum(t, c), "the opener, the lost attempt and the keepers, once each")
		require.Positive(t, keepers, "some retries took the fast path")
	})
}

// The same event retried after Resize (through the writer whose layout predates it, and
// through a new writer), then after the old generation is sealed: it stays counted once.
// Both kinds of event: by time and stamped.
func TestRetryAfterResizeAndSeal(t *testing.T) {
	celebritytest.Long(t)
	both(t, func(t *testing.T, rc redis.UniversalClient) {
		// The first attempts (a Stamp and two Adds) must reach the stripes within one window
		// of the stamps on a loaded machine.
		const window = 2 * time.Second
		prefix := celebritytest.NewPrefix(t)
		o := Options{Prefix: prefix, Stripes: 2, DedupWindow: window, DedupSlices: 2}
		old := newCounter(t, rc, o)
		ctx := context.Background()
		// The layout exists before the events are stamped, so that creating it cannot take a
		// loaded machine's share of the window.
		_, err := old.ensureLayout(ctx)
		require.NoError(t, err)
		byTime := Event{ID: "by-time", Time: time.Now()}
		stamped, err := old.Stamp(ctx, "stamped")
		require.NoError(t, err)
		for _, ev := range []Event{byTime, stamped} {
			res, err := old.Add(ctx, ev, 1)
			require.NoError(t, err)
			require.True(t, res.Applied)
		}
		fresh := newCounter(t, rc, o)
		_, err = fresh.Resize(ctx, 5)
		require.NoError(t, err)
		for _, ev := range []Event{byTime, stamped} {
			retryNeverCounts(t, old, ev, "after Resize, old layout")
			retryNeverCounts(t, fresh, ev, "after Resize, new layout")
		}
		require.Equal(t, int64(2), mustSum(t, fresh))
		// Seal the old generation (one window plus one slice after its boundaries).
		require.Eventually(t, func() bool {
			sealed, err := fresh.Seal(ctx)
			require.NoError(t, err)
			return len(sealed) > 0
		}, 30*time.Second, 20*time.Millisecond)
		for _, ev := range []Event{byTime, stamped} {
			retryNeverCounts(t, old, ev, "after Seal, old layout")
			retryNeverCounts(t, fresh, ev, "after Seal, new layout")
		}
		require.Equal(t, int64(2), mustSum(t, fresh))
		require.Equal(t, int64(2), mustSum(t, old))
	})
}

// A server restart (AOF, appendfsync always) between the attempt whose reply was lost and
// its retry: the record survives with the value, so the retry is a duplicate. Standalone
// only: the shared cluster is not one to restart.
func TestRetryAfterServerRestart(t *testing.T) {
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	inj := faults.New()
	rc := srv.Client(t, func(o *redis.Options) {
		o.Dialer = inj.Dialer(nil)
		o.MaxRetries = -1
	})
	prefix := celebritytest.NewPrefix(t)
	c := newCounter(t, rc, Options{Prefix: prefix, Stripes: 2, DedupWindow: 30 * time.Second})
	ctx := context.Background()
	now := time.Now()
	for i := range 20 {
		_, err := c.Add(ctx, Event{ID: id(i), Time: now}, 1)
		require.NoError(t, err)
	}
	ev := Event{ID: "restart", Time: now}
	inj.DropReply(faults.Match{Command: "EVALSHA"}, 1)
	_, err := c.Add(ctx, ev, 1)
	require.Error(t, err)
	srv.Restart(t)
	// The writer's pooled connections died with the server: retry through a new client.
	c = newCounter(t, srv.Client(t), Options{Prefix: prefix, Stripes: 2, DedupWindow: 30 * time.Second})
	retryNeverCounts(t, c, ev, "after restart")
	for i := range 20 {
		retryNeverCounts(t, c, Event{ID: id(i), Time: now}, "after restart")
	}
	require.Equal(t, int64(21), mustSum(t, c))
}

// A server restored to an earlier point (an old AOF backup) forgets counts and dedup
// records together: when every event is then retried, those the backup holds are
// duplicates and the others are counted, so the sum ends exact. A restore that kept a
// value without its records (or records without their value) would count some event twice
// or never. The events of the restored slice then take the fast path.
func TestRetriesAfterSnapshotRestore(t *testing.T) {
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	prefix := celebritytest.NewPrefix(t)
	o := Options{Prefix: prefix, Stripes: 3, SetMembers: 8, DedupWindow: 30 * time.Second}
	c := newCounter(t, srv.Client(t), o)
	ctx := context.Background()
	now := time.Now()
	const n = 300
	add := func(c *Counter, from, to int) (applied int) {
		for i := from; i < to; i++ {
			res, err := c.Add(ctx, Event{ID: id(i), Time: now}, 1)
			require.NoError(t, err)
			if res.Applied {
				applied++
			}
		}
		return applied
	}
	require.Equal(t, n/2, add(c, 0, n/2))
	snap := srv.Snapshot(t)
	require.Equal(t, n/2, add(c, n/2, n))
	srv.RestoreSnapshot(t, snap)
	c = newCounter(t, srv.Client(t), o)
	require.Equal(t, int64(n/2), mustSum(t, c), "the backup's count")
	require.Equal(t, n/2, add(c, 0, n), "only the events after the backup count again")
	require.Equal(t, 0, add(c, 0, n))
	require.Equal(t, int64(n), mustSum(t, c))
}
