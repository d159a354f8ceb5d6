package stripes

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

func TestCachedReaderStormCostsOneSum(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		clock := testkit.NewClock(time.Now())
		c := newCounter(t, rc, Options{Clock: clock.Now})
		ctx := context.Background()
		for _, id := range []string{"a", "b", "c"} {
			_, err := c.Add(ctx, Event{ID: id, Time: time.Now()}, 1)
			require.NoError(t, err)
		}
		r, err := NewReader(c, ReaderOptions{MaxStaleness: time.Minute})
		require.NoError(t, err)
		defer r.Close()

		// 10,000 reads from 1,000 goroutines released together (the race detector caps
		// live goroutines at 8,128).
		sumsBefore := c.Stats().Sums
		start := make(chan struct{})
		var wg sync.WaitGroup
		var wrong atomic.Int64
		for range 1000 {
			wg.Go(func() {
				<-start
				for range 10 {
					v, err := r.Value(ctx)
					if err != nil || v != 3 {
						wrong.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		require.Zero(t, wrong.Load())
		require.Equal(t, uint64(1), r.Stats().Refreshes, "one sum for the whole storm")
		require.Equal(t, sumsBefore+1, c.Stats().Sums)
		require.LessOrEqual(t, r.Stats().Hits, uint64(10_000-1))

		// A new event is not visible while the cached value is fresh.
		_, err = c.Add(ctx, Event{ID: "d", Time: time.Now()}, 1)
		require.NoError(t, err)
		v, err := r.Value(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), v)
		require.Equal(t, uint64(1), r.Stats().Refreshes)

		// Past three quarters of MaxStaleness the cached value is served and refreshed in
		// the background.
		clock.Advance(50 * time.Second)
		v, err = r.Value(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), v, "served from memory while refreshing")
		require.Eventually(t, func() bool {
			v, err := r.Value(ctx)
			return err == nil && v == 4
		}, 30*time.Second, 10*time.Millisecond)
		require.Equal(t, uint64(2), r.Stats().Refreshes)

		// Past MaxStaleness a caller waits for a fresh sum.
		_, err = c.Add(ctx, Event{ID: "e", Time: time.Now()}, 1)
		require.NoError(t, err)
		clock.Advance(2 * time.Minute)
		v, err = r.Value(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(5), v)
		require.Equal(t, uint64(3), r.Stats().Refreshes)

		require.NoError(t, r.Close())
		_, err = r.Value(ctx)
		require.ErrorIs(t, err, ErrClosed)
	})
}

func TestReaderCallerLeavesOnItsContext(t *testing.T) {
	s := celebritytest.Standalone(t)
	rc := s.Client(t)
	c := newCounter(t, rc, Options{})
	r, err := NewReader(c, ReaderOptions{})
	require.NoError(t, err)
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = r.Value(ctx)
	require.ErrorIs(t, err, context.Canceled)
	// The shared sum still completes and serves the next caller.
	require.Eventually(t, func() bool { return r.Stats().Refreshes == 1 }, 30*time.Second, 10*time.Millisecond)
	v, err := r.Value(context.Background())
	require.NoError(t, err)
	require.Zero(t, v)
}
