package testkit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestClockMovesOnlyWhenTold proves readings stay put until Advance or SetElapsed, and that
// concurrent advances all count (run with -race).
func TestClockMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := testkit.NewClock(start)
	require.True(t, c.Now().Equal(start))
	require.True(t, c.Now().Equal(start), "a clock moved on its own")

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 800*time.Millisecond, c.Elapsed())
	require.True(t, c.Now().Equal(start.Add(800*time.Millisecond)))

	c.SetElapsed(time.Second)
	require.True(t, c.Now().Equal(start.Add(time.Second)))
	c.Advance(-2 * time.Second)
	require.True(t, c.Now().Equal(start.Add(-time.Second)))

	var zero testkit.Clock
	require.True(t, zero.Now().Equal(time.Unix(0, 0)), "the zero value reads the epoch")
}

// TestCtxEndsWithTheTest proves the context is live during the test, bounded, and ended once
// the test is over.
func TestCtxEndsWithTheTest(t *testing.T) {
	var ctx context.Context
	t.Run("inner", func(t *testing.T) {
		ctx = testkit.Ctx(t)
		require.NoError(t, ctx.Err())
		deadline, ok := ctx.Deadline()
		require.True(t, ok)
		require.WithinDuration(t, time.Now().Add(testkit.Bound), deadline, time.Minute)
	})
	require.ErrorIs(t, ctx.Err(), context.Canceled)
}
