package l1cache

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/celebrity-go/celebrity/internal/testkit"
)

func TestTenThousandGetsOfAColdKeyLoadOnce(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		calls.Add(1)
		<-release
		return "v:" + key, nil
	}, Options[string]{})

	const n = 10_000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Get(context.Background(), "celebrity")
			if err == nil && v != "v:celebrity" {
				err = fmt.Errorf("got %q", v)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	// Every goroutine either joined the load or is about to; release once all are waiting.
	require.Eventually(t, func() bool { return c.Stats().Misses == n }, 30*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(1), calls.Load())
	s := c.Stats()
	require.Equal(t, uint64(1), s.Loads)
	require.Equal(t, uint64(n-1), s.Coalesced)
}

func TestHundredColdKeysLoadOncePerKey(t *testing.T) {
	src := newSource()
	for i := range 100 {
		src.set(fmt.Sprint("k", i), fmt.Sprint("v", i))
	}
	c := newCache(t, src.load, Options[string]{Fresh: time.Hour})

	var wg sync.WaitGroup
	for g := range 10_000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := g % 100
			v, err := c.Get(context.Background(), fmt.Sprint("k", i))
			if err != nil || v != fmt.Sprint("v", i) {
				t.Errorf("k%d: got %q, %v", i, v, err)
			}
		}()
	}
	wg.Wait()
	for i := range 100 {
		require.Equal(t, 1, src.count(fmt.Sprint("k", i)), "k%d", i)
	}
	require.Equal(t, int64(100), src.total.Load())
}

func TestCancelledFirstCallerDoesNotFailOthers(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	loadCtxErr := make(chan error, 1)
	var calls atomic.Int64
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		calls.Add(1)
		close(started)
		<-release
		loadCtxErr <- ctx.Err()
		return "value", nil
	}, Options[string]{})

	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := c.Get(first, "k")
		firstErr <- err
	}()
	waitFor(t, started, "the first caller's load to start")

	const others = 50
	results := make(chan string, others)
	for range others {
		go func() {
			v, err := c.Get(context.Background(), "k")
			if err != nil {
				v = err.Error()
			}
			results <- v
		}()
	}
	require.Eventually(t, func() bool { return c.Stats().Coalesced == others }, 30*time.Second, time.Millisecond)

	cancel()
	require.ErrorIs(t, waitFor(t, firstErr, "the cancelled caller"), context.Canceled)
	close(release)
	require.NoError(t, waitFor(t, loadCtxErr, "the load"), "the load must not see the caller's cancellation")
	for range others {
		require.Equal(t, "value", waitFor(t, results, "a waiter"))
	}
	require.Equal(t, int64(1), calls.Load())
}

func TestWaiterLeavesOnItsOwnDeadline(t *testing.T) {
	release := make(chan struct{})
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		<-release
		return "late", nil
	}, Options[string]{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Get(ctx, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	// The load went on and installed its value.
	require.Eventually(t, func() bool { return c.Stats().Entries == 1 }, 30*time.Second, time.Millisecond)
	require.Equal(t, "late", get(t, c, "k"))
	require.Equal(t, uint64(1), c.Stats().Loads)
}

func TestLoadTimeoutEndsAHungLoader(t *testing.T) {
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, Options[string]{LoadTimeout: 10 * time.Millisecond})
	_, err := c.Get(context.Background(), "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestLoaderPanicReachesWaitersAndNeverSticksTheKey(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	clock := new(testkit.Clock)
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		if calls.Add(1) == 1 {
			<-release
			panic("boom")
		}
		return "recovered", nil
	}, Options[string]{Clock: clock.Now, ErrorTTL: time.Second})

	const waiters = 20
	errs := make(chan error, waiters)
	for range waiters {
		go func() {
			_, err := c.Get(context.Background(), "k")
			errs <- err
		}()
	}
	require.Eventually(t, func() bool { return c.Stats().Misses == waiters }, 30*time.Second, time.Millisecond)
	close(release)
	for range waiters {
		err := waitFor(t, errs, "a waiter")
		require.ErrorIs(t, err, ErrLoaderPanic)
		var pe *PanicError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "boom", pe.Value)
		require.Equal(t, "k", pe.Key)
		require.Contains(t, string(pe.Stack), "panic")
	}
	// The panic is cached as a load error for ErrorTTL, then the key loads again.
	_, err := c.Get(context.Background(), "k")
	require.ErrorIs(t, err, ErrLoaderPanic)
	require.Equal(t, int64(1), calls.Load())
	clock.Advance(time.Second)
	require.Equal(t, "recovered", get(t, c, "k"))
	s := c.Stats()
	require.Equal(t, uint64(1), s.Panics)
	require.Equal(t, uint64(1), s.LoadErrors)
}

func TestLoaderGoexitNeverSticksTheKey(t *testing.T) {
	var calls atomic.Int64
	clock := new(testkit.Clock)
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		if calls.Add(1) == 1 {
			runtime.Goexit()
		}
		return "ok", nil
	}, Options[string]{Clock: clock.Now})
	_, err := c.Get(context.Background(), "k")
	require.ErrorIs(t, err, errGoexit)
	clock.Advance(DefaultErrorTTL)
	require.Equal(t, "ok", get(t, c, "k"))
}

func TestCloseEndsLoadsAndLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	started := make(chan struct{})
	c, err := New(func(ctx context.Context, key string) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}, Options[string]{MaxEntries: 10, Stale: time.Second})
	require.NoError(t, err)
	c.Set("kept", "v")
	errs := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), "k")
		errs <- err
	}()
	waitFor(t, started, "the load")
	require.NoError(t, c.Close())
	require.ErrorIs(t, waitFor(t, errs, "the waiter"), context.Canceled)
	_, err = c.Get(context.Background(), "other")
	require.ErrorIs(t, err, ErrClosed)
	require.Equal(t, "v", get(t, c, "kept"), "values are still served after Close")
	require.NoError(t, c.Close(), "Close is idempotent")
}

func TestOnEventMayCallTheCache(t *testing.T) {
	clock := new(testkit.Clock)
	var c *Cache[string]
	var kinds sync.Map
	c = newCache(t, func(ctx context.Context, key string) (string, error) { return "v", nil },
		Options[string]{Clock: clock.Now, Fresh: time.Second, Stale: time.Hour, NoJitter: true, OnEvent: func(e Event) {
			kinds.Store(e.Kind, true)
			_ = c.Stats()
			if e.Kind != EventInvalidate && e.Key != "" {
				c.Set(e.Key+"/seen", "x") // a write of the cache from inside the hook
				c.Invalidate(e.Key)       // a write of the same key's shard
			}
		}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					_, _ = c.Get(context.Background(), fmt.Sprint("k", i%5))
					if i == 25 {
						clock.Advance(2 * time.Second)
					}
				}
			}()
		}
		wg.Wait()
	}()
	waitFor(t, done, "Gets whose hook calls the cache (a hook under a cache lock would deadlock)")
	for _, k := range []EventKind{EventMiss, EventLoad, EventInvalidate} {
		_, ok := kinds.Load(k)
		require.True(t, ok, "no %v event", k)
	}
}

func TestLoadTimeoutReleasesALoaderThatIgnoresItsContext(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	clock := new(testkit.Clock)
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		if calls.Add(1) == 1 {
			<-release // ignores ctx
			return "late", nil
		}
		return "v2", nil
	}, Options[string]{Clock: clock.Now, LoadTimeout: 20 * time.Millisecond, ErrorTTL: time.Second, Fresh: time.Hour})
	t.Cleanup(func() { close(release) }) // before the cache's Close, which waits for the loader

	// The caller's own context ends much later, with a cause of its own: an error from the
	// load's timeout is told apart from the caller giving up.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	giveUp := time.AfterFunc(5*time.Second, func() { cancel(errors.New("gave up")) })
	defer giveUp.Stop()
	_, err := c.Get(ctx, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded, "the waiter must be released by LoadTimeout")

	_, err = c.Get(context.Background(), "k")
	require.ErrorIs(t, err, context.DeadlineExceeded, "the timeout is cached as a load error for ErrorTTL")
	clock.Advance(time.Second)
	require.Equal(t, "v2", get(t, c, "k"), "the key loads again")
	require.Equal(t, int64(2), calls.Load())
}
