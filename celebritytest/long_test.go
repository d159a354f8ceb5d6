package celebritytest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// In quick mode Spread runs every case on exactly one variant and gives each variant its
// share; in a full run every case runs on every variant. Rounds follows the same switch.
func TestSpreadRunsEveryCaseInEveryMode(t *testing.T) {
	for _, tc := range []struct {
		env    string
		full   bool
		rounds int
	}{{"", false, 5}, {"0", false, 5}, {"1", true, 40}} {
		t.Run("CELEBRITY_FULL="+tc.env, func(t *testing.T) {
			t.Setenv(FullEnv, tc.env)
			require.Equal(t, tc.full, Full())
			require.Equal(t, tc.rounds, Rounds(40, 5))
			for _, n := range []int{1, 2, 3} {
				perVariant := make([]int, n)
				for i := range 9 {
					on := 0
					for k := range n {
						if Spread(i, k, n) {
							on++
							perVariant[k]++
						}
					}
					if tc.full {
						require.Equal(t, n, on, "case %d of %d variants", i, n)
					} else {
						require.Equal(t, 1, on, "case %d of %d variants", i, n)
					}
				}
				for k, c := range perVariant {
					require.GreaterOrEqual(t, c, 9/n, "variant %d of %d", k, n)
				}
			}
		})
	}
}
