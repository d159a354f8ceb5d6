package celebrity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestDemotionHoldStartsAfterTheLastRead: a hot key whose reads stop late in an interval is
// demoted by the evaluation of the interval Hold after the one of its last read: the next
// interval counts only its own reads, none, even in the reports made early in it, whose
// local window still reaches back over the key's last reads.
func TestDemotionHoldStartsAfterTheLastRead(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key := p + "fading"
	src.bump(key)
	var caches []*celebrity.Cache[string]
	for range 6 {
		caches = append(caches, newCache(t, srv.Client(t), src, p, readerOptions()))
	}
	o := readerOptions()
	iv := o.Loop.ReportInterval
	stop := readers(t, caches, key)
	require.Eventually(t, func() bool { return hotEverywhere(caches, key, true) }, 30*time.Second, 10*time.Millisecond)
	// Stop the reads at 80% of an interval: each instance's report early in the next one
	// (its local window is half an interval) still sees the last ones.
	for {
		if at := time.Duration(time.Now().UnixNano() % int64(iv)); at >= iv*8/10 && at < iv*85/100 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	// The interval of the key's last Redis-level read: the readers' end, or its last
	// refresh-ahead after it (within RefreshAhead, Fresh/2, unless the machine is slow),
	// as the instances counted it while the key was hot.
	time.Sleep(o.Fresh)
	last := time.Now().UnixNano() / int64(iv)
	require.Eventually(t, func() bool {
		for _, c := range caches {
			last = max(last, celebrity.LastHotRead(c, key))
		}
		return hotEverywhere(caches, key, false)
	}, 30*time.Second, 10*time.Millisecond)
	decided := int64(-1)
	for _, c := range caches {
		if s, ok := celebrity.DemotedIn(c, key); ok {
			decided = max(decided, s)
		}
	}
	require.NotEqual(t, int64(-1), decided, "no leader decided the demotion")
	require.LessOrEqual(t, decided-last, int64(o.Loop.Hold/iv),
		"the hold (%d intervals) starts in the interval after the last read's", int64(o.Loop.Hold/iv))
}
