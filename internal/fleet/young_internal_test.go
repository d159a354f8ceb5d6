package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestYoungInstanceDoesNotOverstateItsReads: an instance 50 ms old that read a key 4 times
// (8 a second over its life so far, the rate a whole fleet started by one deploy would each
// see) must not report it at the rate its young detector gives (4 reads over one 125 ms
// sub-window: 32 a second, over a ReportMinRate of 20); once the detector's window is full,
// rates are the detector's own.
func TestYoungInstanceDoesNotOverstateItsReads(t *testing.T) {
	clk := testkit.NewClock(time.Unix(1_000_000, 0))
	const window = 500 * time.Millisecond
	det, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, Capacity: 256, Window: window, Buckets: 4, EvalInterval: -1,
		MinSamples: 1, TopK: 8, Clock: clk.Now,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = det.Close() })
	born := clk.Now()

	clk.Advance(50 * time.Millisecond)
	for range 4 {
		det.Observe("k")
	}
	top, err := det.Top(8)
	require.NoError(t, err)
	require.Len(t, top, 1)
	require.Greater(t, top[0].Rate, 20.0, "the young detector's own rate overstates")
	top = settled(top, clk.Now().Sub(born), window)
	require.InDelta(t, 8.0, top[0].Rate, 0.01, "4 reads over the whole 500 ms window")

	for range 10 { // a full window of 20 reads a second
		clk.Advance(50 * time.Millisecond)
		det.Observe("k")
	}
	top, err = det.Top(8)
	require.NoError(t, err)
	own := top[0].Rate
	top = settled(top, clk.Now().Sub(born), window)
	require.Equal(t, own, top[0].Rate, "a settled instance reports its detector's rate")
}
