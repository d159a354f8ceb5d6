package l1cache

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/testkit"
)

func TestInvalidateRacingALoadDiscardsItsResult(t *testing.T) {
	src := newSource()
	src.set("k", "old")
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		v, err := src.load(ctx, key) // reads the source before the invalidation
		started <- struct{}{}
		<-release
		return v, err
	}, Options[string]{Fresh: time.Hour})

	first := make(chan string, 1)
	go func() { first <- get(t, c, "k") }()
	waitFor(t, started, "the first load")

	src.set("k", "new")
	c.Invalidate("k")
	close(release)
	// The waiter of the old load gets what it asked for before the invalidation...
	require.Equal(t, "old", waitFor(t, first, "the first Get"))
	// ...but the old result was not installed: the next Get loads the new value.
	require.Equal(t, "new", get(t, c, "k"))
	require.Equal(t, 2, src.count("k"))
	s := c.Stats()
	require.Equal(t, uint64(1), s.Discarded)
	require.Equal(t, uint64(1), s.Invalidations)
}

func TestSetRacingALoadWins(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int64
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		calls.Add(1)
		close(started)
		<-release
		return "loaded-before-set", nil
	}, Options[string]{Fresh: time.Hour})

	done := make(chan string, 1)
	go func() { done <- get(t, c, "k") }()
	waitFor(t, started, "the load")
	c.Set("k", "set")
	require.Equal(t, "set", get(t, c, "k"), "Set is visible at once")
	close(release)
	require.Equal(t, "loaded-before-set", waitFor(t, done, "the waiter"))
	require.Eventually(t, func() bool { return c.Stats().Discarded == 1 }, 30*time.Second, time.Millisecond)
	require.Equal(t, "set", get(t, c, "k"))
	require.Equal(t, int64(1), calls.Load())
}

func TestGetAfterInvalidateDoesNotJoinTheOldLoad(t *testing.T) {
	var calls atomic.Int64
	releases := []chan struct{}{make(chan struct{}), make(chan struct{})}
	started := make(chan int, 2)
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		n := int(calls.Add(1))
		started <- n
		<-releases[n-1]
		return fmt.Sprint("load", n), nil
	}, Options[string]{Fresh: time.Hour})

	first := make(chan string, 1)
	go func() { first <- get(t, c, "k") }()
	require.Equal(t, 1, waitFor(t, started, "load 1"))
	c.Invalidate("k")
	second := make(chan string, 1)
	go func() { second <- get(t, c, "k") }()
	require.Equal(t, 2, waitFor(t, started, "load 2"))
	close(releases[1])
	require.Equal(t, "load2", waitFor(t, second, "second Get"))
	close(releases[0]) // the old load finishes last and must not overwrite load2
	require.Equal(t, "load1", waitFor(t, first, "first Get"))
	require.Eventually(t, func() bool { return c.Stats().Discarded == 1 }, 30*time.Second, time.Millisecond)
	require.Equal(t, "load2", get(t, c, "k"))
}

func TestInvalidateAllDiscardsLoadsInFlight(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		if key == "slow" {
			close(started)
			<-release
		}
		return "v", nil
	}, Options[string]{Fresh: time.Hour})
	get(t, c, "fast")
	done := make(chan string, 1)
	go func() { done <- get(t, c, "slow") }()
	waitFor(t, started, "the slow load")
	c.InvalidateAll()
	close(release)
	waitFor(t, done, "the slow Get")
	require.Eventually(t, func() bool { return c.Stats().Discarded == 1 }, 30*time.Second, time.Millisecond)
	_, ok := c.store.GetIfPresent("fast")
	require.False(t, ok)
	_, ok = c.store.GetIfPresent("slow")
	require.False(t, ok)
}

func TestMarkAllStaleDuringALoad(t *testing.T) {
	newStaged := func(t *testing.T) (*Cache[string], <-chan int, []chan struct{}) {
		var calls atomic.Int64
		releases := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
		started := make(chan int, 3)
		c := newCache(t, func(ctx context.Context, key string) (string, error) {
			n := int(calls.Add(1))
			started <- n
			<-releases[n-1]
			return fmt.Sprint("load", n), nil
		}, Options[string]{Fresh: time.Hour, Clock: new(testkit.Clock).Now})
		return c, started, releases
	}
	t.Run("its result is not fresh", func(t *testing.T) {
		c, started, releases := newStaged(t)
		first := make(chan string, 1)
		go func() { first <- get(t, c, "k") }()
		require.Equal(t, 1, waitFor(t, started, "load 1"))
		c.MarkAllStale()
		close(releases[0])
		require.Equal(t, "load1", waitFor(t, first, "first Get"))
		second := make(chan string, 1)
		go func() { second <- get(t, c, "k") }()
		require.Equal(t, 2, waitFor(t, started, "load 2: load 1 started before MarkAllStale"))
		close(releases[1])
		require.Equal(t, "load2", waitFor(t, second, "second Get"))
		require.Equal(t, "load2", get(t, c, "k"))
	})
	t.Run("a later Get does not join it and it does not overwrite its successor", func(t *testing.T) {
		c, started, releases := newStaged(t)
		first := make(chan string, 1)
		go func() { first <- get(t, c, "k") }()
		require.Equal(t, 1, waitFor(t, started, "load 1"))
		c.MarkAllStale()
		second := make(chan string, 1)
		go func() { second <- get(t, c, "k") }()
		require.Equal(t, 2, waitFor(t, started, "load 2"))
		close(releases[1])
		require.Equal(t, "load2", waitFor(t, second, "second Get"))
		close(releases[0]) // the old load finishes last
		require.Equal(t, "load1", waitFor(t, first, "first Get"))
		require.Eventually(t, func() bool { return c.Stats().Discarded == 1 }, 30*time.Second, time.Millisecond)
		require.Equal(t, "load2", get(t, c, "k"))
		require.Equal(t, uint64(2), c.Stats().Loads)
	})
}
