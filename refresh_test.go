package celebrity_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
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
	o.Loop.ReportInterval = -1
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

// TestAFailedRefreshOfAKeyNobodyReadsIsTriedOnce: a key promoted by hand that nobody here
// reads is refreshed once; when that refresh fails (its source is down) it is not tried again
// every RefreshAhead, which would turn a key nobody reads into a steady stream of Redis
// reads and source loads, counted in the fleet's rates. A key that is read here is retried.
func TestAFailedRefreshOfAKeyNobodyReadsIsTriedOnce(t *testing.T) {
	celebritytest.Long(t)
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	launch, read := p+"launch", p+"read"
	var launchLoads atomic.Int64
	load := func(_ context.Context, key string) (celebrity.Versioned[string], error) {
		if key == launch {
			launchLoads.Add(1)
			return celebrity.Versioned[string]{}, errors.New("source down")
		}
		return celebrity.Versioned[string]{Value: "v1", Version: 1}, nil
	}
	o := loopOptions()
	o.Prefix, o.Loop.ReportInterval = p, -1
	c, err := celebrity.New(srv.Client(t), load, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Ready(t.Context()))
	require.NoError(t, c.Promote(t.Context(), launch))
	require.Eventually(t, func() bool { return launchLoads.Load() >= 1 }, 30*time.Second, time.Millisecond,
		"a newly promoted key is refreshed once")
	require.NoError(t, c.Promote(t.Context(), read))

	// Read the other hot key until refresh-ahead has reloaded it 300 times, one per round of
	// RefreshAhead (10 ms): at least 1.5 s even if the launch key were refreshed in every round
	// too, longer than the 1 s for which the fleet answers a failed load's error without asking
	// the source again. Every one of those rounds passed over the launch key.
	base := c.Stats().Refreshes
	require.Eventually(t, func() bool {
		_, err := c.Get(t.Context(), read)
		require.NoError(t, err)
		return c.Stats().Refreshes >= base+300
	}, 60*time.Second, time.Millisecond)
	require.Equal(t, int64(1), launchLoads.Load(), "the failed refresh of a key nobody reads is not retried")

	// A Get of the launch key is a read here: it is answered (by the fleet's error record, or a
	// load), and refresh-ahead tries the key again from then on.
	_, err = c.Get(t.Context(), launch)
	require.ErrorContains(t, err, "source down")
}
