package celebrity

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRawHotSetParses: the records as Redis holds them become a HotSet, members and
// demotions highest rate first, a lease reported only with a leader.
func TestRawHotSetParses(t *testing.T) {
	hs := rawHotSet{
		version: "7", epoch: "3", leader: "", lease: -2 * time.Millisecond,
		members: map[string]string{"x": "a|10.000|1700000000000", "y": "m|0|1700000000001"},
		demoted: map[string]string{"z": "1.500|1700000000002"},
	}.hotSet("p:")
	require.EqualValues(t, 7, hs.Version)
	require.EqualValues(t, 3, hs.Epoch)
	require.Zero(t, hs.LeaseRemaining)
	require.Equal(t, []HotMember{
		{Key: "x", Rate: 10, Since: time.UnixMilli(1700000000000).UTC()},
		{Key: "y", Manual: true, Since: time.UnixMilli(1700000000001).UTC()},
	}, hs.Members)
	require.Equal(t, []HotMember{{Key: "z", Rate: 1.5, Since: time.UnixMilli(1700000000002).UTC()}}, hs.Demoted)
	require.True(t, rawHotSet{}.hotSet("p:").Empty())
}
