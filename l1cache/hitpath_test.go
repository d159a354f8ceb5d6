package l1cache

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
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
