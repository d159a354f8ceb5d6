package migrate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// Whatever the order in which snapshot pages and log entries reach the target, and however
// often they are repeated, the target ends with the newest version of every record, a
// deleted record never comes back, and every op record once stored stays as it was.
func TestApplyInAnyOrderConvergesToTheNewestVersions(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	base := strings.TrimSuffix(celebritytest.NewPrefix(t), ":")
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		k := routingfmt.Keys(routing.Keys{Prefix: fmt.Sprintf("%s:%d", base, n)}.Tag(routing.BucketUnit(1)))
		r := scriptRig{t: t, c: c, k: k}
		require.Equal(rt, "ok", r.prepare(2, "m", "prepare")[0])
		// The history of three fields: versions 1..h, each a put or a delete.
		type ver struct{ field, rec string }
		var all []ver
		newest := map[string]string{}
		for f := 0; f < 3; f++ {
			field := fmt.Sprintf("f%d", f)
			h := rapid.IntRange(1, 6).Draw(rt, "history")
			for v := 1; v <= h; v++ {
				rec := fmt.Sprintf("%d:l:val%d", v, v)
				if rapid.Bool().Draw(rt, "delete") {
					rec = fmt.Sprintf("%d:t:", v)
				}
				all = append(all, ver{field, rec})
				newest[field] = rec
			}
		}
		// Deliver every version at least once, some twice, in a random order.
		order := rapid.Permutation(all).Draw(rt, "order")
		extra := rapid.SliceOfN(rapid.SampledFrom(all), 0, 5).Draw(rt, "repeats")
		for _, x := range append(order, extra...) {
			out := r.apply(2, "m", 1000, "r", x.field, x.rec, "999999")
			require.Equal(rt, "ok", out[0], "%v", out)
		}
		got, err := c.HGetAll(testkit.Ctx(t), k.Records).Result()
		require.NoError(rt, err)
		require.Equal(rt, newest, got)
		tombs, err := c.ZRange(testkit.Ctx(t), k.Tombstones, 0, -1).Result()
		require.NoError(rt, err)
		var want []string
		for f, rec := range newest {
			if strings.Contains(rec, ":t:") {
				want = append(want, f)
			}
		}
		require.ElementsMatch(rt, want, tombs, "exactly the deleted fields keep a tombstone")
	})
}
