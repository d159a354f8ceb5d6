package l1cache

import (
	"context"
	"testing"
	"time"

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
