package l1cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/testkit"
)

func TestStaleServesTheOldValueAtOnceAndRefreshesOnce(t *testing.T) {
	clock := new(testkit.Clock)
	var calls atomic.Int64
	refreshStarted := make(chan struct{})
	release := make(chan struct{})
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		if calls.Add(1) == 1 {
			return "v1", nil
		}
		close(refreshStarted)
		<-release
		return "v2", nil
	}, Options[string]{Clock: clock.Now, Fresh: time.Second, Stale: 10 * time.Second, NoJitter: true})

	require.Equal(t, "v1", get(t, c, "k"))
	clock.Advance(2 * time.Second)

	// The refresh blocks until release: a Get that waited for it would never finish.
	const n = 1000
	var wg sync.WaitGroup
	got := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got <- get(t, c, "k")
		}()
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	waitFor(t, allDone, "stale Gets to return without waiting for the refresh")
	close(got)
	for v := range got {
		require.Equal(t, "v1", v)
	}
	waitFor(t, refreshStarted, "the refresh")
	require.Equal(t, int64(2), calls.Load(), "exactly one refresh")
	s := c.Stats()
	require.Equal(t, uint64(n), s.StaleHits)
	require.Equal(t, uint64(1), s.Refreshes)

	close(release)
	require.Eventually(t, func() bool { return get(t, c, "k") == "v2" }, 30*time.Second, time.Millisecond)
	require.Equal(t, int64(2), calls.Load())
}

func TestStaleWindowEndsInAWaitingLoad(t *testing.T) {
	clock := new(testkit.Clock)
	src := newSource()
	src.set("k", "v1")
	c := newCache(t, src.load, Options[string]{Clock: clock.Now, Fresh: time.Second, Stale: time.Second, NoJitter: true})
	require.Equal(t, "v1", get(t, c, "k"))
	src.set("k", "v2")
	clock.Advance(2 * time.Second) // past Fresh and Stale
	require.Equal(t, "v2", get(t, c, "k"), "a value past Stale is never served")
	require.Equal(t, uint64(0), c.Stats().StaleHits)
}

func TestStaleIfErrorServesTheLastGoodValueThenTheError(t *testing.T) {
	clock := new(testkit.Clock)
	boom := errors.New("source down")
	var failing atomic.Bool
	var calls atomic.Int64
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		calls.Add(1)
		if failing.Load() {
			return "", boom
		}
		return "good", nil
	}, Options[string]{Clock: clock.Now, Fresh: time.Second, StaleIfError: 5 * time.Second, ErrorTTL: 100 * time.Millisecond, NoJitter: true})

	require.Equal(t, "good", get(t, c, "k"))
	failing.Store(true)

	clock.SetElapsed(2 * time.Second) // stale, within StaleIfError (ends at 6s)
	require.Equal(t, "good", get(t, c, "k"), "failed load within StaleIfError serves the old value")
	require.Equal(t, int64(2), calls.Load())
	require.Equal(t, "good", get(t, c, "k"), "within ErrorTTL the loader is not called again")
	require.Equal(t, int64(2), calls.Load())

	clock.SetElapsed(3 * time.Second) // ErrorTTL passed: one more attempt, still the old value
	require.Equal(t, "good", get(t, c, "k"))
	require.Equal(t, int64(3), calls.Load())

	clock.SetElapsed(6*time.Second + 1) // StaleIfError over: the error
	_, err := c.Get(context.Background(), "k")
	require.ErrorIs(t, err, boom)
	require.Equal(t, int64(4), calls.Load())
	_, err = c.Get(context.Background(), "k")
	require.ErrorIs(t, err, boom, "the error is cached for ErrorTTL")
	require.Equal(t, int64(4), calls.Load())

	clock.Advance(100 * time.Millisecond) // never cached for longer
	failing.Store(false)
	require.Equal(t, "good", get(t, c, "k"))
	require.Equal(t, int64(5), calls.Load())

	s := c.Stats()
	require.Equal(t, uint64(3), s.StaleIfErrorHits)
	require.Equal(t, uint64(1), s.ErrorHits)
	require.Equal(t, uint64(3), s.LoadErrors)
}

func TestFailedRefreshInStaleWindowKeepsServingAndRetriesAfterErrorTTL(t *testing.T) {
	clock := new(testkit.Clock)
	var calls atomic.Int64
	loaded := make(chan error, 10)
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		if calls.Add(1) == 1 {
			return "v1", nil
		}
		return "", errors.New("refresh failed")
	}, Options[string]{Clock: clock.Now, Fresh: time.Second, Stale: 10 * time.Second, ErrorTTL: time.Second, NoJitter: true,
		OnEvent: func(e Event) {
			if e.Kind == EventLoad {
				loaded <- e.Err
			}
		}})
	get(t, c, "k")
	waitFor(t, loaded, "first load")
	clock.SetElapsed(2 * time.Second)
	require.Equal(t, "v1", get(t, c, "k"))
	require.Error(t, waitFor(t, loaded, "failed refresh"))
	require.Eventually(t, func() bool { return c.peek("k").err != nil }, 30*time.Second, time.Millisecond)
	for range 10 {
		require.Equal(t, "v1", get(t, c, "k"))
	}
	require.Equal(t, int64(2), calls.Load(), "no retry within ErrorTTL")
	clock.SetElapsed(3 * time.Second)
	require.Equal(t, "v1", get(t, c, "k"))
	require.Error(t, waitFor(t, loaded, "retried refresh"))
	require.Equal(t, int64(3), calls.Load())
}

func TestNotFoundIsCachedForNegativeTTL(t *testing.T) {
	clock := new(testkit.Clock)
	src := newSource()
	c := newCache(t, src.load, Options[string]{Clock: clock.Now, NegativeTTL: time.Second, NoJitter: true})
	for range 3 {
		_, err := c.Get(context.Background(), "ghost")
		require.ErrorIs(t, err, ErrNotFound)
	}
	require.Equal(t, 1, src.count("ghost"))
	src.set("ghost", "appeared")
	clock.Advance(time.Second)
	require.Equal(t, "appeared", get(t, c, "ghost"))
	s := c.Stats()
	require.Equal(t, uint64(2), s.NegativeHits)
	require.Zero(t, s.LoadErrors, "absence is not a failure")
}

func TestMaxRefreshesCapsBackgroundRefreshes(t *testing.T) {
	clock := new(testkit.Clock)
	var background atomic.Bool
	release := make(chan struct{})
	var running atomic.Int64
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		if background.Load() {
			running.Add(1)
			<-release
		}
		return "v", nil
	}, Options[string]{Clock: clock.Now, Fresh: time.Second, Stale: time.Hour, NoJitter: true, MaxRefreshes: 2})
	for i := range 5 {
		get(t, c, fmt.Sprint("k", i))
	}
	background.Store(true)
	clock.Advance(2 * time.Second)
	for i := range 5 {
		require.Equal(t, "v", get(t, c, fmt.Sprint("k", i)))
	}
	require.Eventually(t, func() bool { return running.Load() == 2 }, 30*time.Second, time.Millisecond)
	s := c.Stats()
	require.Equal(t, uint64(2), s.Refreshes)
	require.Equal(t, uint64(3), s.RefreshesSkipped)
	close(release)
	// A skipped refresh is tried again by a later stale hit once a slot is free.
	require.Eventually(t, func() bool {
		for i := range 5 {
			get(t, c, fmt.Sprint("k", i))
		}
		return c.Stats().Refreshes == 5
	}, 30*time.Second, time.Millisecond)
}

func TestMarkAllStaleEndsFreshness(t *testing.T) {
	t.Run("with a stale window the old value is served and refreshed", func(t *testing.T) {
		clock := new(testkit.Clock)
		src := newSource()
		src.set("k", "v1")
		c := newCache(t, src.load, Options[string]{Clock: clock.Now, Fresh: time.Hour, Stale: time.Hour})
		get(t, c, "k")
		src.set("k", "v2")
		c.MarkAllStale()
		require.Equal(t, "v1", get(t, c, "k"))
		require.Eventually(t, func() bool { return get(t, c, "k") == "v2" }, 30*time.Second, time.Millisecond)
		require.Equal(t, uint64(1), c.Stats().Refreshes)
	})
	t.Run("without a stale window the value is reloaded", func(t *testing.T) {
		clock := new(testkit.Clock)
		src := newSource()
		src.set("k", "v1")
		c := newCache(t, src.load, Options[string]{Clock: clock.Now, Fresh: time.Hour})
		get(t, c, "k")
		src.set("k", "v2")
		c.MarkAllStale()
		require.Equal(t, "v2", get(t, c, "k"))
		require.Equal(t, "v2", get(t, c, "k"))
		require.Equal(t, 2, src.count("k"))
	})
}

func TestCapacityBoundsTheStore(t *testing.T) {
	t.Run("entries", func(t *testing.T) {
		c := newCache(t, func(ctx context.Context, key string) (string, error) { return key, nil },
			Options[string]{MaxEntries: 100, Fresh: time.Hour})
		for i := range 5000 {
			get(t, c, fmt.Sprint("k", i))
		}
		require.Eventually(t, func() bool { c.store.CleanUp(); return c.Stats().Entries <= 100 }, 30*time.Second, time.Millisecond)
		require.NotZero(t, c.Stats().Evictions)
	})
	t.Run("cost", func(t *testing.T) {
		c := newCache(t, func(ctx context.Context, key string) ([]byte, error) { return make([]byte, 100), nil },
			Options[[]byte]{MaxCost: 10_000, Sizer: func(_ string, v []byte) uint32 { return uint32(len(v)) }, Fresh: time.Hour})
		for i := range 5000 {
			get(t, c, fmt.Sprint("k", i))
		}
		require.Eventually(t, func() bool { c.store.CleanUp(); return c.store.WeightedSize() <= 10_000 }, 30*time.Second, time.Millisecond)
		require.LessOrEqual(t, c.Stats().Entries, 100)
		require.NotZero(t, c.Stats().Evictions)
	})
}

func TestExpiredEntriesLeaveTheStore(t *testing.T) {
	clock := new(testkit.Clock)
	c := newCache(t, func(ctx context.Context, key string) (string, error) { return key, nil },
		Options[string]{Clock: clock.Now, Fresh: time.Second, Stale: time.Second, NoJitter: true})
	for i := range 100 {
		get(t, c, fmt.Sprint("k", i))
	}
	clock.Advance(2*time.Second + 1)
	require.Eventually(t, func() bool { c.store.CleanUp(); return c.Stats().Entries == 0 }, 30*time.Second, time.Millisecond)
	require.Equal(t, uint64(100), c.Stats().Expirations)
}

func TestFailedReloadAfterMarkAllStaleReturnsTheErrorWithoutStaleIfError(t *testing.T) {
	clock := new(testkit.Clock)
	boom := errors.New("source down")
	var failing atomic.Bool
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		if failing.Load() {
			return "", boom
		}
		return "old", nil
	}, Options[string]{Clock: clock.Now, Fresh: time.Hour, NoJitter: true})
	require.Equal(t, "old", get(t, c, "k"))
	c.MarkAllStale()
	failing.Store(true)
	_, err := c.Get(context.Background(), "k")
	require.ErrorIs(t, err, boom, "StaleIfError 0: a failed load returns its error")
	_, err = c.Get(context.Background(), "k")
	require.ErrorIs(t, err, boom, "and the error is cached for ErrorTTL")
	require.Zero(t, c.Stats().StaleIfErrorHits)

	// With a StaleIfError window the old value is served instead.
	sie := newCache(t, func(ctx context.Context, key string) (string, error) {
		if failing.Load() {
			return "", boom
		}
		return "old", nil
	}, Options[string]{Clock: clock.Now, Fresh: time.Hour, StaleIfError: time.Minute, NoJitter: true})
	failing.Store(false)
	require.Equal(t, "old", get(t, sie, "k"))
	sie.MarkAllStale()
	failing.Store(true)
	require.Equal(t, "old", get(t, sie, "k"))
	require.Equal(t, uint64(1), sie.Stats().StaleIfErrorHits)
}

// TestRefreshIsCountedBeforeItsLoaderRuns: a background refresh, stale or early, is in
// Stats before its loader is called, so a caller that saw the loader run (or the value it
// installed) reads the refresh in Stats too.
func TestRefreshIsCountedBeforeItsLoaderRuns(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprint("early=", early), func(t *testing.T) {
			clock := new(testkit.Clock)
			var c *Cache[string]
			var calls atomic.Int64
			seen := make(chan Stats, 1)
			o := Options[string]{Clock: clock.Now, Fresh: 10 * time.Second, Stale: time.Hour, NoJitter: true}
			if early {
				o.Beta, o.Rand = 1, func() uint64 { return 1 << 63 } // 0.5
			}
			c = newCache(t, func(ctx context.Context, key string) (string, error) {
				if calls.Add(1) == 2 {
					seen <- c.Stats()
				}
				clock.Advance(time.Second) // a load that takes a second, for XFetch
				return "v", nil
			}, o)
			get(t, c, "k")
			if early {
				clock.SetElapsed(10*time.Second - 100*time.Millisecond) // fresh, past the XFetch threshold
			} else {
				clock.SetElapsed(20 * time.Second) // stale
			}
			get(t, c, "k")
			s := waitFor(t, seen, "the refresh's loader")
			if early {
				require.Equal(t, uint64(1), s.EarlyRefreshes)
			} else {
				require.Equal(t, uint64(1), s.Refreshes)
			}
		})
	}
}
