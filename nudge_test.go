package celebrity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// evaluations returns the fleet's evaluations (summed over the instances) and how many of
// them were partial (of the interval under way, after a nudge), and the reports.
func evaluations(caches []*celebrity.Cache[string]) (partial, reports uint64) {
	for _, c := range caches {
		st := c.Stats()
		partial += st.Evaluations - st.FullEvaluations
		reports += st.Reports
	}
	return partial, reports
}

// TestHotKeyReportsDoNotNudge: the reports of a key that is already hot, however fast it is
// read, do not nudge the leader into evaluating the interval under way (a nudge exists to
// promote a key early; a hot key needs no promotion), so a long-lived celebrity costs the
// leader one evaluation per interval, not one every quarter interval.
func TestHotKeyReportsDoNotNudge(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		hot := p + "celebrity"
		src.bump(hot)
		var caches []*celebrity.Cache[string]
		for range 3 {
			caches = append(caches, newCache(t, d.client(t), src, p, loopOptions()))
		}
		require.NoError(t, caches[0].Promote(t.Context(), hot))
		require.Eventually(t, func() bool { return hotEverywhere(caches, hot, true) }, 30*time.Second, 10*time.Millisecond)
		partial0, reports0 := evaluations(caches)
		readers(t, caches, hot)
		// Each instance reads the key (refresh-ahead alone reloads it every Fresh/2) far above
		// the nudge level (PromoteRate/SummaryShards = 25/s): 30 reports are ten intervals'
		// worth, each of which would nudge.
		require.Eventually(t, func() bool {
			_, reports := evaluations(caches)
			return reports >= reports0+30
		}, 30*time.Second, 10*time.Millisecond)
		partial, _ := evaluations(caches)
		require.Equal(t, partial0, partial, "partial evaluations after the key was hot")
	})
}

// TestManyNudgesCostTheLeaderAtMostFourPartialEvaluationsPerInterval: eight instances (each
// its own client) read a key that is not hot fast enough that each one's report takes the
// key's sum on its summary shard across PromoteRate/SummaryShards and nudges the leader, but
// the fleet's sum stays under PromoteRate, so the key is never promoted and the nudges never
// stop. The leader evaluates the interval under way at most once per quarter interval
// however many reports nudge it: at most 4 partial evaluations per interval (plus one
// interval's worth either side of the measured span), where it used to make one per nudge.
func TestManyNudgesCostTheLeaderAtMostFourPartialEvaluationsPerInterval(t *testing.T) {
	celebritytest.Long(t)
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		key := p + "lukewarm"
		src.bump(key)
		o := loopOptions()
		o.Fresh = 5 * time.Millisecond // each instance reaches Redis up to 200 times a second
		o.Loop.ReportInterval = 250 * time.Millisecond
		o.Loop.PromoteRate, o.Loop.DemoteRate = 4000, 100 // 8 instances make 1,600 reads/s at most
		o.Loop.SummaryShards = 128                        // a nudge at 31.25/s on one shard
		o.Loop.EarlyReportRate = 40
		start := time.Now()
		var caches []*celebrity.Cache[string]
		for range 8 {
			caches = append(caches, newCache(t, d.client(t), src, p, o))
		}
		readers(t, caches, key)
		// Wait for the nudges to have made partial evaluations, over enough intervals to
		// tell a bound of 4 per interval from one evaluation per nudge.
		require.Eventually(t, func() bool {
			partial, _ := evaluations(caches)
			return partial >= 40
		}, 60*time.Second, 10*time.Millisecond)
		partial, _ := evaluations(caches)
		intervals := int64(time.Since(start)/o.Loop.ReportInterval) + 2
		t.Logf("%d partial evaluations in %d intervals", partial, intervals)
		require.LessOrEqual(t, partial, uint64(4*intervals), "partial evaluations in %d intervals", intervals)
		require.False(t, hotEverywhere(caches[:1], key, true), "the key stayed under PromoteRate")
	})
}
