package fleet

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
	old := map[string]Member{"a": {}, "b": {}, "c": {}}
	next := map[string]Member{"b": {}, "d": {Manual: true}}
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
