package l1cache

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSizerRunsOutsideTheCacheLocks(t *testing.T) {
	// A Sizer that takes a lock of the host must not deadlock with a goroutine that holds
	// that lock and calls the cache: the Sizer must not run under the key's shard lock.
	var hostMu sync.Mutex
	sizing := make(chan struct{}, 10)
	started := make(chan struct{})
	release := make(chan struct{})
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		close(started)
		<-release
		return "loaded", nil
	}, Options[string]{MaxCost: 1000, Fresh: time.Hour, Sizer: func(key, v string) uint32 {
		sizing <- struct{}{}
		hostMu.Lock()
		defer hostMu.Unlock()
		return uint32(len(v))
	}})

	done := make(chan string, 1)
	go func() { done <- get(t, c, "k") }()
	waitFor(t, started, "the load")

	hostMu.Lock()
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			hostMu.Unlock()
		}
	}
	defer unlock()
	close(release)
	waitFor(t, sizing, "the Sizer of the loaded value") // blocked on hostMu from here on
	invalidated := make(chan struct{})
	go func() {
		c.Invalidate("k") // the host, holding hostMu, calls the cache
		close(invalidated)
	}()
	waitFor(t, invalidated, "Invalidate while the Sizer waits for the host's lock")
	unlock()
	require.Equal(t, "loaded", waitFor(t, done, "the Get"))
	_, ok := c.store.GetIfPresent("k")
	require.False(t, ok, "the load that Invalidate superseded installed its result")

	c.Set("k", "abc")
	waitFor(t, sizing, "the Sizer of a Set value")
	c.store.CleanUp() // apply the store's pending writes to its weight
	require.Equal(t, uint64(3), c.store.WeightedSize(), "the store weighs the Set value by the Sizer")
}
