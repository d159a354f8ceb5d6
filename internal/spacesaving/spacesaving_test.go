package spacesaving

import (
	"strconv"
	"testing"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// checkInvariants verifies the heap order and that the index and the heap describe the same
// set of keys.
func checkInvariants(t require.TestingT, s *Summary) {
	used := 0
	for _, v := range s.index {
		if v != 0 {
			used++
		}
	}
	require.Equal(t, len(s.heap), used, "index slots in use")
	for p := range s.heap {
		e := &s.heap[p]
		if p > 0 {
			require.LessOrEqual(t, s.heap[(p-1)/2].count, e.count, "heap order at %d", p)
		}
		require.Equal(t, int32(p+1), s.index[e.slot], "index of %q", e.key)
		slot, found := s.find(e.key, e.hash)
		require.True(t, found, "key %q reachable from its home slot", e.key)
		require.Equal(t, uint64(e.slot), slot)
	}
}

// TestSpaceSavingBoundsEveryCount is a model-based test: against exact counts, every tracked
// count overestimates by at most its error, an untracked key never had more than the
// smallest count, the counts sum to the total weight, and the index stays consistent through
// evictions and backward-shift deletions.
func TestSpaceSavingBoundsEveryCount(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 12).Draw(t, "capacity")
		keys := rapid.IntRange(1, 40).Draw(t, "keys")
		s := New(capacity)
		exact := map[string]uint64{}
		var total uint64
		steps := rapid.IntRange(1, 300).Draw(t, "steps")
		for range steps {
			k := "k" + strconv.Itoa(rapid.IntRange(0, keys-1).Draw(t, "key"))
			w := rapid.Uint64Range(1, 5).Draw(t, "w")
			s.Add(k, hashing.Sum64(k), w)
			exact[k] += w
			total += w
			checkInvariants(t, &s)
		}
		require.LessOrEqual(t, len(s.heap), capacity)
		var sum uint64
		tracked := map[string]bool{}
		for _, e := range s.heap {
			sum += e.count
			tracked[e.key] = true
			require.LessOrEqual(t, exact[e.key], e.count, "count of %q is an overestimate", e.key)
			require.LessOrEqual(t, e.count-e.err, exact[e.key], "count of %q within its error", e.key)
			require.LessOrEqual(t, e.err, total/uint64(capacity), "error of %q within total/capacity", e.key)
		}
		require.Equal(t, total, sum, "Space-Saving counts sum to the stream weight")
		for k, c := range exact {
			if !tracked[k] {
				require.LessOrEqual(t, c, s.Min(), "untracked %q had at most the minimum", k)
			}
		}
		s.Reset()
		checkInvariants(t, &s)
		require.Empty(t, s.heap)
	})
}

// TestSpaceSavingIndexSurvivesCollidingKeys drives many keys through one tiny table so that
// probe runs wrap around and deletions shift entries across the table's end.
func TestSpaceSavingIndexSurvivesCollidingKeys(t *testing.T) {
	s := New(4)
	for i := range 3000 {
		k := strconv.Itoa(i % 37)
		s.Add(k, hashing.Sum64(k), uint64(1+i%3))
		checkInvariants(t, &s)
	}
}
