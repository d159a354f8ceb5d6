package fleet

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAnnouncementsAndHeartbeatsNameTheirVersionByVid checks the formats apply.lua and the
// heartbeat write: an announcement names the vid it changes and the one it makes (an older
// release's, the number alone), and a heartbeat names the version applied only when its
// number and vid are both this instance's.
func TestAnnouncementsAndHeartbeatsNameTheirVersionByVid(t *testing.T) {
	a, ok := parseAnnouncement("d3 2.17.5 3.18.9\na|1.000|5|1:k")
	require.True(t, ok)
	require.Equal(t, announcement{version: 3, prev: "2.17.5", vid: "3.18.9",
		changes: a.changes}, a)
	require.Len(t, a.changes, 1)
	a, ok = parseAnnouncement("d3\n-|1.000|5|1:k")
	require.True(t, ok, "a release before vids")
	require.Empty(t, a.vid)
	for _, bad := range []string{"d3 2.17.5\na|1.000|5|1:k", "d3  3.18.9\na|1.000|5|1:k", "3 3.18.9"} {
		_, ok = parseAnnouncement(bad)
		require.False(t, ok, "%q", bad)
	}

	var f fleet
	require.True(t, f.isApplied("0 -"), "nothing applied, no change made")
	vid := "3.18.9"
	f.vid.Store(&vid)
	f.version.Store(3)
	require.True(t, f.isApplied("3 3.18.9"))
	require.True(t, f.isApplied("3"), "a release before vids: the number alone")
	require.False(t, f.isApplied("3 3.20.1"), "another change under number 3")
	require.False(t, f.isApplied("2 2.17.5"))
	require.False(t, f.isApplied("n5"))
}
