package celebrity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestRefreshAheadSkipsTheReadThatLoaded: a hot key read less often than Fresh misses on
// every read (its entry expired); the read that loaded an entry does not also make
// refresh-ahead reload it, so each read costs one Redis read, not two. Read often, the key
// is refreshed ahead.
func TestRefreshAheadSkipsTheReadThatLoaded(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key := p + "hot"
	src.bump(key)
	o := loopOptions()
	o.ReportInterval = -1
	c := newCache(t, srv.Client(t), src, p, o)
	require.NoError(t, c.Promote(t.Context(), key))
	require.Eventually(t, func() bool { return c.Stats().Refreshes >= 1 }, 30*time.Second, time.Millisecond,
		"a newly promoted key is refreshed once")
	base := c.Stats().Refreshes
	for range 10 {
		_, err := c.Get(t.Context(), key)
		require.NoError(t, err)
		time.Sleep(3 * o.Fresh) // the entry expires between reads: every read loads
	}
	require.LessOrEqual(t, c.Stats().Refreshes-base, uint64(2), "no refresh on top of the loads (one for the first read, which may hit the refreshed entry)")

	// Read without pause: refresh-ahead keeps the entry fresh.
	deadline := c.Stats().Refreshes + 5
	require.Eventually(t, func() bool {
		_, err := c.Get(t.Context(), key)
		require.NoError(t, err)
		return c.Stats().Refreshes >= deadline
	}, 30*time.Second, time.Millisecond)
}
