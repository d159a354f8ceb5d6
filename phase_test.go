package celebrity_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestLatePhaseStillReports: an instance whose random draw puts its report moment at the very
// end of the interval (Rand returns the largest value) still reports every interval in which
// it has a key at or above ReportMinRate; a moment between the interval's last tick and its
// end would be skipped in every interval.
func TestLatePhaseStillReports(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key := p + "read"
	src.bump(key)
	o := loopOptions()
	o.Loop.PromoteRate = 1e6 // never promoted: the key stays in the regular lane
	o.Loop.DemoteRate = 1
	o.Rand = func() uint64 { return uint64(o.Loop.ReportInterval) - 1 }
	late := newCache(t, srv.Client(t), src, p, o)
	leader := late
	readers(t, []*celebrity.Cache[string]{late}, key)
	waitHeartbeats(t, leader, 10)
	require.NotZero(t, late.Stats().Reports, "reports in 10 intervals with a key at over ReportMinRate")
}
