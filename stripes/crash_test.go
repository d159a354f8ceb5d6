package stripes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/stretchr/testify/require"
)

// TestKillAndRestartWithAOFKeepsCountsAndDedup: with 1 stripe the counter starts as a home
// record, whose generation 1 stays in the layout hash across the resize.
func TestKillAndRestartWithAOFKeepsCountsAndDedup(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("stripes=%d", n), func(t *testing.T) { killAndRestart(t, n) })
	}
}

func killAndRestart(t *testing.T, stripes int) {
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	rc := s.Client(t)
	c := newCounter(t, rc, Options{Stripes: stripes})
	ctx := context.Background()
	now := time.Now()
	for i := range 300 {
		_, err := c.Add(ctx, Event{ID: fmt.Sprintf("k%d", i), Time: now}, 1)
		require.NoError(t, err)
	}
	_, err := c.Resize(ctx, 6)
	require.NoError(t, err)
	require.Equal(t, stripes == 1, mustLayout(t, c).doc.Gens[0].Home, "generation 1 is a home generation")
	for i := 300; i < 400; i++ {
		_, err := c.Add(ctx, Event{ID: fmt.Sprintf("k%d", i), Time: now.Add(time.Second)}, 1)
		require.NoError(t, err)
	}

	s.Restart(t) // kill -9, then load the AOF

	require.Eventually(t, func() bool { return rc.Ping(ctx).Err() == nil }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, int64(400), mustSum(t, c))
	for i := range 400 {
		at := now
		if i >= 300 {
			at = now.Add(time.Second)
		}
		res, err := c.Add(ctx, Event{ID: fmt.Sprintf("k%d", i), Time: at}, 1)
		require.NoError(t, err)
		require.False(t, res.Applied, "event %d survived the crash with its dedup record", i)
	}
	require.Equal(t, int64(400), mustSum(t, c))
}
