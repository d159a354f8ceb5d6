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
		p := celebritytest.Prefix(t)
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
