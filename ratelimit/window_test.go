package ratelimit

import (
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// waitUntilLateInWindow returns once the clock is in the last quarter of a window of
// length p (windows aligned to Unix time), and returns that window's index.
func waitUntilLateInWindow(p time.Duration) int64 {
	for {
		ms := time.Now().UnixMilli()
		if ms%p.Milliseconds() >= p.Milliseconds()*3/4 {
			return ms / p.Milliseconds()
		}
		time.Sleep(time.Millisecond)
	}
}

// A Fixed window admits its whole limit at the end of one window and again at the start of
// the next: 2·Rate within less than one Period. Sliding refuses the second burst.
func TestFixedWindowBoundaryBurst(t *testing.T) {
	const period = 2 * time.Second
	c := celebritytest.Standalone(t).Client(t)
	for _, w := range []Window{Fixed, Sliding} {
		t.Run(w.String(), func(t *testing.T) {
			ctx := t.Context()
			var (
				a     *admissions
				l     *Limiter
				first Result
			)
			// The first burst must be counted late in the server's window. The client aims for
			// the last quarter of its clock's window; on a busy machine the call can reach the
			// server after that window ended, so the server's ResetAfter (the time left in the
			// window that counted it) decides, and a burst counted early is tried again on a
			// fresh limiter.
			for attempt := 0; ; attempt++ {
				require.Less(t, attempt, 10, "the first burst was never counted in the last half of its window")
				a = &admissions{}
				l = newLimiter(t, c, Options{Limit: Limit{Rate: 20, Period: period}, Window: w})
				a.watch(l)
				waitUntilLateInWindow(period)
				var err error
				first, err = l.AllowN(ctx, "k", 20)
				require.NoError(t, err)
				require.True(t, first.Allowed)
				if w == Sliding || first.ResetAfter <= period/2 {
					break
				}
			}
			// The next window: for Fixed, once the server's window that counted the burst ended.
			next := time.Now().Add(first.ResetAfter + 10*time.Millisecond)
			if w == Sliding {
				win := time.Now().UnixMilli() / period.Milliseconds()
				for time.Now().UnixMilli()/period.Milliseconds() == win {
					time.Sleep(time.Millisecond)
				}
			} else {
				time.Sleep(time.Until(next))
			}
			second, err := l.AllowN(ctx, "k", 20)
			require.NoError(t, err)
			times := a.sorted()
			if w == Fixed {
				require.True(t, second.Allowed, "a new fixed window starts with its whole limit")
				require.Len(t, times, 40)
				span := times[39].Sub(times[0])
				require.Less(t, span, period, "2·Rate admitted within less than one Period")
				t.Logf("fixed: 40 admitted within %v (limit 20 per %v)", span, period)
			} else {
				require.False(t, second.Allowed, "the sliding window still holds the first burst")
				require.Positive(t, second.RetryAfter)
				require.Len(t, times, 20)
			}
		})
	}
}

// GCRA answers with the remaining burst, how long to wait, and how long until the key is
// back to its full burst, as computed by the server.
func TestGCRAReportsRemainingRetryAndReset(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		// One cell every 10s: the calls below take far less, so the durations are sharp.
		l := newLimiter(t, c, Options{Limit: Limit{Rate: 10, Period: 100 * time.Second, Burst: 5}})
		ctx := t.Context()
		r, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		require.True(t, r.Allowed)
		require.Equal(t, int64(4), r.Remaining)
		require.Equal(t, time.Duration(-1), r.RetryAfter)
		require.Equal(t, 10*time.Second, r.ResetAfter) // one emission interval from an idle key
		for range 4 {
			r, err = l.Allow(ctx, "k")
			require.NoError(t, err)
			require.True(t, r.Allowed)
		}
		require.Zero(t, r.Remaining)
		r, err = l.Allow(ctx, "k")
		require.NoError(t, err)
		require.False(t, r.Allowed)
		require.Greater(t, r.RetryAfter, 5*time.Second) // one emission interval, 10s, less the time spent
		require.LessOrEqual(t, r.RetryAfter, 10*time.Second)
		require.Greater(t, r.ResetAfter, 45*time.Second) // five intervals, less the time spent
		require.LessOrEqual(t, r.ResetAfter, 50*time.Second)
		_, err = l.AllowN(ctx, "k", 6)
		require.ErrorIs(t, err, ErrInvalid, "a cost above Burst can never be admitted")
	})
}

// Exact Sliding reports what is left of the window and when the oldest grant leaves it.
func TestExactSlidingReportsRemainingAndRetry(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		l := newLimiter(t, c, Options{Limit: Limit{Rate: 3, Period: 10 * time.Second}, Window: Sliding})
		ctx := t.Context()
		for want := int64(2); want >= 0; want-- {
			r, err := l.Allow(ctx, "k")
			require.NoError(t, err)
			require.True(t, r.Allowed)
			require.Equal(t, want, r.Remaining)
		}
		r, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		require.False(t, r.Allowed)
		require.Greater(t, r.RetryAfter, 9*time.Second) // one sub-window (1s) later than the Period
		require.LessOrEqual(t, r.RetryAfter, 11*time.Second)
	})
}
