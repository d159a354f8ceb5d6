package ratelimit

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// approxOptions returns the filled options of an Approximate limiter of rate per second.
func approxOptions(t testing.TB, rate, maxUnsynced int64) Options {
	t.Helper()
	o, err := Options{Limit: Limit{Rate: rate, Period: time.Second}, Mode: Approximate, MaxUnsynced: maxUnsynced}.withDefaults()
	require.NoError(t, err)
	return o
}

// TestApproxAdmitStaysWithinEstimatePlusUnsynced checks the local decision alone: the
// estimate plus the unsynced admissions never pass Rate, and MaxUnsynced admissions without
// a sync are the most one instance makes.
func TestApproxAdmitStaysWithinEstimatePlusUnsynced(t *testing.T) {
	o := approxOptions(t, 10, 3)
	var st approx
	st.est, st.estIdx = 6, 100
	cur := int64(100)
	for i := range 3 {
		r := st.admit(cur, 1, o)
		require.True(t, r.Allowed, "admission %d", i)
		require.Equal(t, int64(10-6-i-1), r.Remaining)
	}
	r := st.admit(cur, 1, o)
	require.False(t, r.Allowed, "MaxUnsynced reached")
	require.Equal(t, time.Duration(0), r.RetryAfter, "room under Rate: only a sync is awaited")
	require.Equal(t, int64(3), st.unsynced)

	st = approx{est: 9, estIdx: 100}
	require.True(t, st.admit(cur, 1, o).Allowed)
	r = st.admit(cur, 1, o)
	require.False(t, r.Allowed, "Rate reached")
	require.Equal(t, o.SyncInterval, r.RetryAfter)

	st = approx{est: 10, estIdx: 100}
	require.True(t, st.admit(cur+int64(o.span()), 1, o).Allowed, "an estimate whose sub-windows all left the window counts 0")
}

// TestApplySyncRemovesWhatTheSyncCarried checks that the counts a sync carried leave the
// unsynced ones once the shared count includes them, and later admissions stay.
func TestApplySyncRemovesWhatTheSyncCarried(t *testing.T) {
	var ids atomic.Uint64
	st := approx{counts: []count{{100, 2}, {101, 3}}, unsynced: 5}
	req := st.nextSync(101, 11, &ids)
	require.Same(t, req, st.nextSync(101, 11, &ids), "a pending sync is sent again unchanged")
	st.counts[1].n += 4 // admitted while the sync was in flight
	st.unsynced += 4
	sent := time.Unix(7, 0)
	st.applySync(req, 20, 101, sent, 11)
	require.Nil(t, st.pending)
	require.Equal(t, []count{{101, 4}}, st.counts)
	require.Equal(t, int64(4), st.unsynced)
	require.Equal(t, int64(20), st.est)
	require.Equal(t, sent, st.lastSync)
}

// TestAddChunkNeverMixesSubWindows checks the chunk alone: cells of the same sub-window are
// added to the chunk, cells of another replace it.
func TestAddChunkNeverMixesSubWindows(t *testing.T) {
	now := time.Unix(100, 0)
	var ls lease
	ls.addChunk(now, now.Add(50*time.Millisecond), 7, 5)
	require.Equal(t, int64(5), ls.left)
	ls.addChunk(now, now.Add(60*time.Millisecond), 7, 3)
	require.Equal(t, int64(8), ls.left, "same sub-window: added, earlier deadline kept")
	require.Equal(t, now.Add(50*time.Millisecond), ls.deadline)
	ls.addChunk(now, now.Add(90*time.Millisecond), 8, 2)
	require.Equal(t, int64(2), ls.left, "a later sub-window replaces the chunk")
	require.Equal(t, int64(8), ls.window)
}

// TestSlotUsageCountsTheWindowAndWhenItEmpties: Peek's plan step sums a slot's sub-window
// counts and finds when the newest sub-window holding cells leaves the window; a reply of
// the wrong length is refused. No Redis.
func TestSlotUsageCountsTheWindowAndWhenItEmpties(t *testing.T) {
	// Sub-windows of 100 ms, k = 3; the server time 1050 ms is 50 ms into sub-window 10, so
	// the counts are of sub-windows 8, 9 and 10, which leave the window at 1100, 1200, 1300.
	for _, tc := range []struct {
		name       string
		res        []int64
		used       int64
		resetAfter time.Duration
	}{
		{"empty window", []int64{1050, 0, 0, 0}, 0, 0},
		{"only the oldest sub-window", []int64{1050, 4, 0, 0}, 4, 50 * time.Millisecond},
		{"the middle one", []int64{1050, 0, 2, 0}, 2, 150 * time.Millisecond},
		{"all three", []int64{1050, 1, 2, 3}, 6, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, reset, err := slotUsage(2, "base", 7, 100, 3, tc.res)
			require.NoError(t, err)
			require.Equal(t, SlotUsage{Slot: 2, Key: "base", Budget: 7, Used: tc.used}, s)
			require.Equal(t, tc.resetAfter, reset)
		})
	}
	_, _, err := slotUsage(0, "base", 7, 100, 3, []int64{1050, 1, 2})
	require.Error(t, err)
}

// TestApproxIndexFollowsTheServerAndCountsNeverMoveEarlier checks that admissions are
// counted in the server's sub-windows through the instance's offset, and that an index the
// offset moved back (a later sync measured it again) counts in the latest sub-window already
// counted: later, never earlier, so the count stays in the window at least as long.
func TestApproxIndexFollowsTheServerAndCountsNeverMoveEarlier(t *testing.T) {
	o := approxOptions(t, 100, 10)
	st := approx{offset: -250} // this host is 250 ms ahead of the server
	require.Equal(t, int64(10), st.index(1250, 100), "local 1250 ms is server 1000 ms")
	require.True(t, st.admit(st.index(1250, 100), 1, o).Allowed)
	st.offset = -300 // measured again: the index goes back one sub-window
	require.True(t, st.admit(st.index(1250, 100), 1, o).Allowed)
	require.Equal(t, []count{{10, 2}}, st.counts)
}
