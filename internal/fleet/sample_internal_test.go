package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/hotkeys"
)

// sampleLoop is a Loop with only what the report's sampling reads: its options and an
// empty hot set, on a clock the test sets.
func sampleLoop(now *time.Time) *Loop {
	l := &Loop{o: Options{InstanceID: "i1", ReportInterval: time.Second, PromoteRate: 100, DemoteRate: 25,
		HotReportEvery: 1, ReportsPerInterval: 32, Clock: func() time.Time { return *now }}}
	empty := map[string]Member{}
	l.fleet.hot.Store(&empty)
	l.fleet.sent = map[string]bool{}
	return l
}

// TestSampleEveryFollowsTheStatedSize: K is ⌈N/ReportsPerInterval⌉ for the size a leader
// stated within sizeLife intervals, 1 without one (no leader that estimates: every instance
// reports every interval, as a leader of a release without sampling needs), 1 with the
// sampling off, and at most maxSampleEvery.
func TestSampleEveryFollowsTheStatedSize(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := sampleLoop(&now)
	require.Equal(t, int64(1), l.sampleEvery(), "no size stated")
	l.fleet.setSize(100, now.UnixNano())
	require.Equal(t, int64(4), l.sampleEvery(), "⌈100/32⌉")
	l.fleet.setSize(32, now.UnixNano())
	require.Equal(t, int64(1), l.sampleEvery(), "a fleet of ReportsPerInterval reports every interval")
	l.fleet.setSize(1e9, now.UnixNano())
	require.Equal(t, int64(maxSampleEvery), l.sampleEvery())
	l.fleet.setSize(0, now.UnixNano())
	require.Equal(t, int64(1), l.sampleEvery(), "a poll found no size alive")
	l.fleet.setSize(1000, now.UnixNano())
	now = now.Add(sizeLife * l.o.ReportInterval)
	require.Equal(t, int64(32), l.sampleEvery(), "a stated size lasts sizeLife intervals...")
	now = now.Add(time.Millisecond)
	require.Equal(t, int64(1), l.sampleEvery(), "...and no longer")
	l.fleet.setSize(1000, now.UnixNano())
	l.o.ReportsPerInterval = -1
	require.Equal(t, int64(1), l.sampleEvery(), "sampling off")
}

// TestRegularPairsInTurns: with K = 4, an instance on its turn reports every key at 4 times
// its rate, marked sampled, except a key it reads at PromoteRate/4 or faster, which it
// reports at its own rate on every interval, its turn or not.
func TestRegularPairsInTurns(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := sampleLoop(&now)
	top := []hotkeys.KeyLoad{{Key: "warm", Rate: 10}, {Key: "fast", Rate: 30}, {Key: "cold", Rate: 0}}
	require.Equal(t, []any{"warm", "t40.000", "fast", "30.000"}, l.regularPairs(top, 7, 0, 4, true))
	require.Equal(t, []any{"fast", "30.000"}, l.regularPairs(top, 7, 0, 4, false))
	require.Equal(t, []any{"warm", "10.000", "fast", "30.000"}, l.regularPairs(top, 7, 0, 1, true), "K = 1: every key, unscaled")
	turns := 0
	for slot := range int64(40) {
		if l.onTurn(slot, 4) {
			turns++
		}
	}
	require.Equal(t, 10, turns, "one turn in 4 intervals")
}

// TestSampleScaleLevelsUnevenTurns: a whole interval's sampled rates are scaled by the fleet's
// size over the instances its reports stood for (up or down); a partial evaluation's only
// down; without an estimate or a report, not at all.
func TestSampleScaleLevelsUnevenTurns(t *testing.T) {
	var f fleet
	require.Equal(t, 1.0, f.sampleScale(40, false), "no estimate yet")
	f.estimateFleet(100, 1)
	require.Equal(t, 2.0, f.sampleScale(50, false))
	require.Equal(t, 0.5, f.sampleScale(200, false))
	require.Equal(t, 1.0, f.sampleScale(50, true), "a partial sum is not scaled up")
	require.Equal(t, 0.5, f.sampleScale(200, true))
	require.Equal(t, 1.0, f.sampleScale(0, false))
	f.estimateFleet(200, 2)
	require.Equal(t, int64(125), f.fleetN.Load(), "the estimate moves a quarter of the way")
}
