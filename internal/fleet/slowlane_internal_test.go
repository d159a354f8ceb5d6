package fleet

import (
	"strconv"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// slowLaneLoop is a Loop with only what slowLane uses: its options and its slow detector,
// as New builds them, on a settable clock.
func slowLaneLoop(t *testing.T, every int) (*Loop, *testkit.Clock) {
	clk := testkit.NewClock(time.Unix(1_000_000, 0))
	o := Options{ReportInterval: time.Second, ReportMinRate: 40, ReportTop: 8, SlowReportEvery: every, InstanceID: "inst", Clock: clk.Now}
	det, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, Capacity: slowCapacity, Window: o.ReportInterval, Buckets: 10, EvalInterval: -1,
		MinSamples: 1, TopK: min(slowTop*o.ReportTop, slowCapacity), Clock: o.Clock,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = det.Close() })
	return &Loop{o: o, slow: det}, clk
}

// turn returns the first interval from slot on that is the instance's slow-lane turn.
func turn(l *Loop, slot int64) int64 {
	every := int64(l.o.SlowReportEvery)
	for (slot+int64(xxhash.Sum64String(l.o.InstanceID+"/slow")%uint64(every)))%every != 0 {
		slot++
	}
	return slot
}

// TestSlowLaneRateIsTheReadsCounted: the slow lane reports a key's reads averaged over the
// intervals they were counted in, never more. A young detector's rate divides by the little
// history it has (at least one sub-window), so rate × interval would turn two reads 50 ms
// after a start into twenty: every new or restarted instance would overstate its lukewarm
// keys in its first slow report. In steady state, reads spread evenly report their rate.
func TestSlowLaneRateIsTheReadsCounted(t *testing.T) {
	t.Run("young", func(t *testing.T) {
		l, clk := slowLaneLoop(t, 2)
		clk.Advance(50 * time.Millisecond)
		l.slow.Observe("k")
		l.slow.Observe("k")
		pairs := l.slowLane(nil, turn(l, 0))
		require.Equal(t, []any{"k", "2.000"}, pairs, "two reads in one interval: 2 a second")
	})
	t.Run("steady", func(t *testing.T) {
		const every = 4
		l, clk := slowLaneLoop(t, every)
		start := clk.Now().UnixNano() / int64(time.Second)
		first := turn(l, start+2) // the detector's window is full by then
		var pairs []any
		for slot := start + 1; slot <= first; slot++ {
			for range 10 { // ten reads a second, evenly spread
				clk.Advance(100 * time.Millisecond)
				l.slow.Observe("k")
			}
			pairs = l.slowLane(nil, slot)
		}
		require.Len(t, pairs, 2, "turn %d", first)
		r, err := strconv.ParseFloat(pairs[1].(string), 64)
		require.NoError(t, err)
		require.LessOrEqual(t, r, 10.0, "never over the reads made")
		require.GreaterOrEqual(t, r, 8.0)
	})
}
