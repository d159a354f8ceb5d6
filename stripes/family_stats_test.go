package stripes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestFamilyStatsKeepCountsOfDroppedNames counts events, duplicates, sums read and sums
// cached on a real server, then lets the family drop its names (MaxNames, then IdleAfter):
// the counts of the dropped names stay, so they never decrease.
func TestFamilyStatsKeepCountsOfDroppedNames(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	f := newFamily(t, rc, FamilyOptions{Counter: Options{Prefix: celebritytest.Prefix(t)}, Interval: -1,
		MaxNames: 2, MaxStaleness: time.Hour})
	now := time.Now()
	for i := range 3 {
		name := fmt.Sprintf("course:%d", i)
		for _, id := range []string{"a", "b", "a"} {
			_, err := f.Add(ctx, name, Event{ID: id, Time: now}, 1)
			require.NoError(t, err)
		}
		for range 2 {
			_, err := f.Sum(ctx, name)
			require.NoError(t, err)
		}
	}
	require.Equal(t, FamilyStats{Names: 2, Applied: 6, Duplicates: 3, Sums: 3, CachedSums: 3, Dropped: 1}, f.Stats())

	f.copts.Clock = func() time.Time { return time.Now().Add(time.Hour) }
	require.NoError(t, f.Tick(ctx))
	require.Equal(t, FamilyStats{Applied: 6, Duplicates: 3, Sums: 3, CachedSums: 3, Dropped: 3}, f.Stats(),
		"idle names dropped, their counts kept")
}
