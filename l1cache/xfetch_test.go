package l1cache

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// slowLoadCache returns a cache whose first load of each key takes delta on the fake clock,
// so that early refresh sees a last load duration of delta.
func slowLoadCache(t *testing.T, clock *testkit.Clock, delta time.Duration, o Options[string]) (*Cache[string], <-chan string) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{}
	refreshed := make(chan string, 100_000)
	o.Clock = clock.Now
	c := newCache(t, func(ctx context.Context, key string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if !seen[key] {
			seen[key] = true
			clock.Advance(delta)
			return "first", nil
		}
		refreshed <- key
		return "refreshed", nil
	}, o)
	return c, refreshed
}

func TestEarlyRefreshStartsBeforeExpiryAtTheXFetchThreshold(t *testing.T) {
	// With u fixed at 0.5, XFetch refreshes once remaining < Beta*delta*ln 2.
	clock := new(testkit.Clock)
	delta := time.Second
	c, refreshed := slowLoadCache(t, clock, delta, Options[string]{
		Fresh: 10 * time.Second, NoJitter: true, Beta: 1, Rand: func() uint64 { return 1 << 63 },
	})
	require.Equal(t, "first", get(t, c, "k")) // loaded at 0, took 1s: fresh until 10s
	threshold := 10*time.Second - time.Duration(math.Ln2*float64(delta))
	for clock.Elapsed() < threshold-10*time.Millisecond {
		clock.Advance(10 * time.Millisecond)
		require.Equal(t, "first", get(t, c, "k"))
		require.Zero(t, c.Stats().EarlyRefreshes, "refreshed early at %v, before the threshold %v", clock.Elapsed(), threshold)
	}
	clock.SetElapsed(threshold + time.Millisecond)
	require.Equal(t, "first", get(t, c, "k"), "the hit that starts the refresh is served at once")
	waitFor(t, refreshed, "the early refresh")
	require.Equal(t, uint64(1), c.Stats().EarlyRefreshes)
	require.Less(t, clock.Elapsed(), 10*time.Second, "the refresh started before expiry")
	require.Eventually(t, func() bool { return get(t, c, "k") == "refreshed" }, 30*time.Second, time.Millisecond)
}

func TestEarlyRefreshFrequencyFollowsXFetch(t *testing.T) {
	// 2000 keys, each hit once with `remaining` left before expiry: the share of hits that
	// start an early refresh must be exp(-remaining/(Beta*delta)).
	const keys = 2000
	const delta = 100 * time.Millisecond
	for _, tc := range []struct {
		beta      float64
		remaining time.Duration
	}{
		{1, 50 * time.Millisecond},
		{1, 200 * time.Millisecond},
		{2, 300 * time.Millisecond},
		{0.5, 20 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("beta=%g remaining=%v", tc.beta, tc.remaining), func(t *testing.T) {
			clock := new(testkit.Clock)
			const fresh = time.Hour
			c, _ := slowLoadCache(t, clock, delta, Options[string]{
				Fresh: fresh, NoJitter: true, Beta: tc.beta, Rand: seededRand(42),
				MaxRefreshes: keys, // count every decision, none skipped by the cap
			})
			starts := make([]time.Duration, keys)
			for i := range keys {
				starts[i] = clock.Elapsed()
				get(t, c, fmt.Sprint("k", i))
			}
			for i := range keys {
				clock.SetElapsed(starts[i] + fresh - tc.remaining)
				get(t, c, fmt.Sprint("k", i))
			}
			p := math.Exp(-float64(tc.remaining) / (tc.beta * float64(delta)))
			want := p * keys
			sd := math.Sqrt(keys * p * (1 - p))
			require.Zero(t, c.Stats().RefreshesSkipped)
			got := float64(c.Stats().EarlyRefreshes)
			require.InDelta(t, want, got, 4*sd, "early refreshes: got %v, want %.0f±%.0f", got, want, 4*sd)
		})
	}
}

func TestEarlyRefreshNeverRunsWithBetaZero(t *testing.T) {
	clock := new(testkit.Clock)
	// Rand returning 0 would refresh on every hit if early refresh were on.
	c, _ := slowLoadCache(t, clock, time.Second, Options[string]{
		Fresh: 10 * time.Second, NoJitter: true, Rand: func() uint64 { return 0 },
	})
	get(t, c, "k")
	for clock.Elapsed() < 10*time.Second-time.Millisecond {
		clock.Advance(time.Millisecond)
		get(t, c, "k")
	}
	s := c.Stats()
	require.Zero(t, s.EarlyRefreshes)
	require.Equal(t, uint64(1), s.Loads)
}

func TestJitterSpreadsExpiriesAcrossTheBand(t *testing.T) {
	celebritytest.Long(t)
	clock := new(testkit.Clock)
	const n = 10_000
	const fresh = 10 * time.Second
	c := newCache(t, func(ctx context.Context, key string) (string, error) { return key, nil },
		Options[string]{Clock: clock.Now, Fresh: fresh, Rand: seededRand(7)}) // default Jitter 10%
	for i := range n {
		get(t, c, fmt.Sprint("k", i))
	}
	lo, hi := fresh-fresh/10, fresh // the band: [Fresh*(1-Jitter), Fresh]
	const bins = 10
	var hist [bins]int
	for i := range n {
		until := time.Duration(c.peek(fmt.Sprint("k", i)).freshUntil)
		require.GreaterOrEqual(t, until, lo)
		require.LessOrEqual(t, until, hi)
		hist[min(bins-1, int((until-lo)*bins/(hi-lo)))]++
	}
	for b, count := range hist {
		// Uniform: 1000 per bin, standard deviation 30.
		require.InDelta(t, n/bins, count, 150, "bin %d of %v", b, hist)
	}

	// Observed through Get: all fresh just before the band, about half past its middle.
	clock.SetElapsed(lo - 1)
	for i := range n {
		get(t, c, fmt.Sprint("k", i))
	}
	require.Equal(t, uint64(n), c.Stats().Loads)
	clock.SetElapsed(lo + (hi-lo)/2)
	for i := range n {
		get(t, c, fmt.Sprint("k", i))
	}
	require.InDelta(t, n/2, int(c.Stats().Loads)-n, 300)
}
