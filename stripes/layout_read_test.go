package stripes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestLayoutShowsGenerationsAndStripes: Layout and ReadLayout report the generations with
// their states (open, closed, folded), the stripe values and the recorded dedup settings, as
// a Resize and a Seal change them; reading writes nothing.
func TestLayoutShowsGenerationsAndStripes(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		const window = time.Second
		c := newCounter(t, rc, Options{Stripes: 2, DedupWindow: window, DedupSlices: 4})
		ctx := context.Background()
		withLayout(t, c)
		add := func(from, n int) {
			for i := range n {
				res, err := c.Add(ctx, Event{ID: fmt.Sprintf("e%d", from+i), Time: time.Now()}, 1)
				require.NoError(t, err)
				require.True(t, res.Applied)
			}
		}
		add(0, 10)
		lo, err := c.Layout(ctx)
		require.NoError(t, err)
		require.Equal(t, "views", lo.Name)
		require.Equal(t, c.keys.layout(), lo.Key)
		require.Equal(t, window, lo.DedupWindow)
		require.Equal(t, 4, lo.DedupSlices)
		require.Len(t, lo.Generations, 1)
		g1 := lo.Generations[0]
		require.Equal(t, uint64(1), g1.Gen)
		require.Equal(t, GenOpen, g1.State)
		require.Equal(t, 2, g1.Stripes)
		require.Len(t, g1.Values, 2)
		require.Equal(t, int64(10), g1.Total)
		require.Equal(t, int64(10), g1.Values[0].Value+g1.Values[1].Value)
		require.True(t, g1.SealableAt.IsZero())

		g2, err := c.Resize(ctx, 3)
		require.NoError(t, err)
		pastBoundary(t, c, 1)
		add(100, 5)
		// Another process, without a Counter and without knowing the dedup settings.
		lo, err = ReadLayout(ctx, rc, c.opts.Prefix, "views")
		require.NoError(t, err)
		require.Equal(t, window, lo.DedupWindow, "the recorded settings")
		require.Len(t, lo.Generations, 2)
		require.Equal(t, GenClosed, lo.Generations[0].State)
		require.False(t, lo.Generations[0].SealableAt.IsZero())
		for _, s := range lo.Generations[0].Values {
			require.False(t, s.End.IsZero(), "stripe %d closed", s.Index)
		}
		require.Equal(t, g2, lo.Generations[1].Gen)
		require.Equal(t, GenOpen, lo.Generations[1].State)
		require.Len(t, lo.Generations[1].Values, 3)
		require.Equal(t, int64(5), lo.Generations[1].Total)
		again, err := ReadLayout(ctx, rc, c.opts.Prefix, "views")
		require.NoError(t, err)
		require.Equal(t, lo.Version, again.Version, "reading changes nothing")

		sealEventually(t, c, 1)
		lo, err = c.Layout(ctx)
		require.NoError(t, err)
		require.Equal(t, GenFolded, lo.Generations[0].State)
		require.Equal(t, int64(10), lo.Generations[0].Folded)
		require.Equal(t, int64(10), lo.Base)
		sum, err := c.Sum(ctx)
		require.NoError(t, err)
		require.Equal(t, lo.Base+lo.Generations[1].Total, sum)
	})
}

// TestReadLayoutRefusesBadNamesAndCreatesNothing: a missing counter is ErrNoCounter and
// stays missing; bad names and prefixes wrap ErrInvalid.
func TestReadLayoutRefusesBadNamesAndCreatesNothing(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	p := celebritytest.NewPrefix(t)
	_, err := ReadLayout(ctx, rc, p, "nobody")
	require.ErrorIs(t, err, ErrNoCounter)
	n, err := celebritytest.AdminOf(t, rc).Exists(ctx, keys{prefix: p, name: "nobody"}.layout()).Result()
	require.NoError(t, err)
	require.Zero(t, n)
	for _, bad := range [][2]string{{p, ""}, {p, "a{b}"}, {"p{", "x"}, {p, string(make([]byte, maxNameBytes+1))}} {
		_, err := ReadLayout(ctx, rc, bad[0], bad[1])
		require.ErrorIs(t, err, ErrInvalid, "prefix %q name %q", bad[0], bad[1])
	}
}
