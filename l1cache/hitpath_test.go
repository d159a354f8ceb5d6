package l1cache

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/testkit"
)

func TestFreshHitDoesNotAllocate(t *testing.T) {
	for name, o := range map[string]Options[string]{
		"defaults":               {MaxEntries: 10, Fresh: time.Hour},
		"early refresh and hook": {MaxEntries: 10, Fresh: time.Hour, Beta: RecommendedBeta, OnEvent: func(Event) {}},
		"cost bound":             {MaxCost: 100, Sizer: func(string, string) uint32 { return 1 }, Fresh: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCache(t, func(ctx context.Context, key string) (string, error) { return "v", nil }, o)
			require.Equal(t, "v", get(t, c, "k"))
			ctx := context.Background()
			allocs := testing.AllocsPerRun(1000, func() { _, _ = c.Get(ctx, "k") })
			require.Zero(t, allocs)
			require.GreaterOrEqual(t, c.Stats().Hits, uint64(1000))
		})
	}
}

// TestEntryOfAStringIsOneCacheLine checks that the entry of a two-word value is 64 bytes, the
// size class whose objects sit on cache lines of their own, so that a hit reads one line of
// it.
func TestEntryOfAStringIsOneCacheLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is computed for 64-bit platforms")
	}
	require.Equal(t, uintptr(64), unsafe.Sizeof(entry[string]{}))
}

// TestConcurrentHitsAreCountedExactly has many goroutines hit the cache at once, on more Ps
// than the cache had counters for when it was created, and checks that every hit is counted
// once: the hit counters are per P, written without a locked instruction while the goroutine
// is pinned to its P, and a P created later shares an overflow counter.
func TestConcurrentHitsAreCountedExactly(t *testing.T) {
	clock := new(testkit.Clock)
	c := newCache(t, func(ctx context.Context, key string) (string, error) { return "v", nil },
		Options[string]{MaxEntries: 10, Fresh: time.Hour, Clock: clock.Now})
	require.Equal(t, "v", get(t, c, "k"))
	before := c.Stats()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(len(c.stats.stripes) + 3))

	const goroutines, perGoroutine = 16, 2000
	ctx := context.Background()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range perGoroutine {
				if _, err := c.Get(ctx, "k"); err != nil {
					t.Error(err)
					return
				}
				runtime.Gosched() // move between Ps
			}
		})
	}
	wg.Wait()
	after := c.Stats()
	require.Equal(t, uint64(goroutines*perGoroutine), after.Hits-before.Hits)
	require.Equal(t, before.Loads, after.Loads, "every Get was a hit")
}
