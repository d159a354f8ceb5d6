package fleet

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeaderEvaluationsAreBoundedWhateverTheNudges drives the leader's choice of what to
// evaluate through intervals with 0 to 1,000 nudging reports at random moments (as from a
// fleet of that many instances), with its timer waking it just after every quarter interval:
// each interval gets one full evaluation and at most subTicks partial ones, however many
// nudges came, and every nudge is followed by a partial evaluation of its interval (or the
// full one) within a quarter interval and the timer's lag.
func TestLeaderEvaluationsAreBoundedWhateverTheNudges(t *testing.T) {
	const iv = int64(time.Second)
	step := iv / subTicks
	lag := iv / 20
	for _, nudges := range []int{0, 1, 8, 100, 1000} {
		f := &fleet{}
		r := rand.New(rand.NewPCG(1, uint64(nudges)))
		type wake struct {
			at    int64
			nudge bool
		}
		const intervals = 20
		base := int64(1_000_000) * iv
		var wakes []wake
		for q := range int64(intervals * subTicks) {
			wakes = append(wakes, wake{at: base + (q+1)*step + lag})
		}
		for k := range int64(intervals) {
			for range nudges {
				wakes = append(wakes, wake{at: base + k*iv + r.Int64N(iv), nudge: true})
			}
		}
		sort.Slice(wakes, func(i, j int) bool { return wakes[i].at < wakes[j].at })
		partial, full := map[int64]int{}, map[int64]int{}
		var waiting []int64 // nudges not yet followed by an evaluation of their interval
		for _, w := range wakes {
			if w.nudge {
				f.nudgeSlot.Store(w.at / iv)
				waiting = append(waiting, w.at)
			}
			slot, isPartial, ok := f.evalTarget(w.nudge, w.at, iv)
			if !ok {
				continue
			}
			if isPartial {
				partial[w.at/iv]++
			} else {
				full[slot]++
			}
			kept := waiting[:0]
			for _, n := range waiting {
				if n/iv != slot {
					kept = append(kept, n)
					continue
				}
				require.LessOrEqual(t, w.at-n, step+lag, "%d nudges/interval: a nudge waited past the next quarter's evaluation", nudges)
			}
			waiting = kept
		}
		for _, n := range waiting {
			require.Greater(t, n, wakes[len(wakes)-1].at-step-lag, "%d nudges/interval: a nudge never evaluated", nudges)
		}
		for k := base / iv; k < base/iv+intervals-1; k++ {
			require.Equal(t, 1, full[k], "%d nudges/interval: full evaluations of interval %d", nudges, k)
			require.LessOrEqual(t, partial[k], subTicks, "%d nudges/interval: partial evaluations in interval %d", nudges, k)
			if nudges > 0 {
				require.Positive(t, partial[k], "%d nudges/interval: interval %d was nudged and never evaluated early", nudges, k)
			}
		}
	}
}
