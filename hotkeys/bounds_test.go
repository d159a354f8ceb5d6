package hotkeys_test

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestKeysSeenOnceAreNeverHot streams a million distinct keys per second, each seen once,
// beside one celebrity. A key that replaced the sketch's smallest entry starts at about that
// count with an error as large, so only its guaranteed count (Count - Error) may decide.
func TestKeysSeenOnceAreNeverHot(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	rec := &recorder{}
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, Window: 2 * time.Second, HotRate: 100,
		EvalInterval: -1, Clock: clk.Now, OnHot: rec.add,
	})
	require.NoError(t, err)
	defer d.Close()
	const perMilli = 1000 // 1,000,000 distinct keys per second
	next := 0
	for ms := 1; ms <= 300; ms++ {
		for range perMilli {
			d.Observe("once:" + strconv.Itoa(next))
			next++
		}
		for range 50 { // 50,000/s: 5% of the traffic
			d.Observe(celebrity)
		}
		clk.Advance(time.Millisecond)
		if ms%100 == 0 {
			d.Evaluate()
		}
	}
	top, err := d.Top(20)
	require.NoError(t, err)
	require.Equal(t, celebrity, top[0].Key)
	onceTracked := 0
	for _, l := range top[1:] {
		require.Greater(t, l.Count, 0.0)
		require.GreaterOrEqual(t, l.Error, l.Count-1, "a key seen once is counted at about its error (%+v)", l)
		onceTracked++
	}
	require.NotZero(t, onceTracked, "the sketch does track keys seen once, with their error")
	hot := d.Hot()
	require.Equal(t, 1, len(hot), "of a million keys seen once none is hot")
	require.Equal(t, celebrity, hot[0])
	require.Equal(t, uint64(1), d.Stats().HotEvents)
	require.Equal(t, celebrity, rec.all()[0].Key)
}

// TestHugeCostsSaturateInsteadOfWrapping records costs whose sum overflows 64 bits: every
// figure stays in range (shares in [0, 1], counts never smaller than one of their parts).
func TestHugeCostsSaturateInsteadOfWrapping(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, EvalInterval: -1, Clock: clk.Now,
		Shard: func(key string) string { return "s" + key[:1] },
	})
	require.NoError(t, err)
	defer d.Close()
	const huge = math.MaxUint64 / 3 * 2
	for range 4 {
		d.ObserveCost("a", huge)
		d.ObserveCost("b", huge)
	}
	d.ObserveCost("c", 1)
	clk.Advance(time.Second)
	top, err := d.Top(3)
	require.NoError(t, err)
	require.Len(t, top, 3)
	for _, l := range top {
		require.GreaterOrEqual(t, l.Share, 0.0, "%+v", l)
		require.LessOrEqual(t, l.Share, 1.0, "%+v", l)
		require.GreaterOrEqual(t, l.Count, 0.0)
	}
	require.GreaterOrEqual(t, top[0].Count, float64(huge), "a count never wraps below one of its parts")
	require.GreaterOrEqual(t, top[1].Count, float64(huge))
	require.GreaterOrEqual(t, d.TotalRate(), top[0].Rate, "the total never wraps below one key")
	sv, err := d.ShardView()
	require.NoError(t, err)
	for _, s := range sv.Shards {
		require.LessOrEqual(t, s.Share, 1.0, "%+v", s)
	}
	require.GreaterOrEqual(t, sv.Skew, 0.0)
	require.LessOrEqual(t, sv.Skew, float64(len(sv.Shards)))
}

// TestYoungDetectorReportsNoBurstRates observes a burst one millisecond after creation: the
// rate is measured over at least one sub-window, not over the millisecond.
func TestYoungDetectorReportsNoBurstRates(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	rec := &recorder{}
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, Window: 10 * time.Second, Buckets: 5, HotRate: 1000,
		EvalInterval: -1, Clock: clk.Now, OnHot: rec.add,
	})
	require.NoError(t, err)
	defer d.Close()
	clk.Advance(time.Millisecond)
	for range 100 {
		d.Observe(celebrity)
	}
	d.Evaluate()
	top, err := d.Top(1)
	require.NoError(t, err)
	require.InDelta(t, 50, top[0].Rate, 1e-9, "100 events over the minimum span of one sub-window (2s)")
	require.InDelta(t, 50, d.TotalRate(), 1e-9)
	require.Empty(t, rec.all(), "100 events in a millisecond are not 100,000/s")

	// Once more than a sub-window has passed, the rate divides by the history covered.
	clk.Advance(3*time.Second - time.Millisecond)
	top, err = d.Top(1)
	require.NoError(t, err)
	require.InDelta(t, 100.0/3, top[0].Rate, 1e-9)
}
