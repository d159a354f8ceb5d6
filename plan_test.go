package celebrity

import (
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPlanLearnPromotesNewAndDemotesGoneMembers: a new version of the hot set promotes the
// keys it added and demotes the keys it dropped, each with the record of its decision, and
// leaves the others alone.
func TestPlanLearnPromotesNewAndDemotesGoneMembers(t *testing.T) {
	old := map[string]member{"a": {}, "b": {}, "c": {}}
	next := map[string]member{"b": {}, "d": {Manual: true}}
	p := planLearn(old, next, map[string]string{"a": "12.500|1700000000000", "c": "garbage"})
	require.Equal(t, []string{"d"}, p.promoted)
	sort.Slice(p.demoted, func(i, j int) bool { return p.demoted[i].key < p.demoted[j].key })
	require.Equal(t, []demotion{
		{key: "a", rate: 12.5, decided: time.UnixMilli(1700000000000)},
		{key: "c"},
	}, p.demoted)
	require.Empty(t, planLearn(next, next, nil).promoted)
	require.Empty(t, planLearn(next, next, nil).demoted)
}

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
