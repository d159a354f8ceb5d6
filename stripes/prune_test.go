package stripes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLayoutDropsSealedGenerationsOnceTheirStripesExpired(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		// Every event below is stamped with the local time and must reach its stripe within
		// one window: 1s leaves a loaded machine a margin of three over the slowest Add
		// seen. The layout is created before the first event is stamped.
		const window = time.Second
		c := newCounter(t, rc, Options{Stripes: 2, DedupWindow: window})
		ctx := context.Background()
		_, err := c.ensureLayout(ctx)
		require.NoError(t, err)
		old := Event{ID: "g1", Time: time.Now()}
		_, err = c.Add(ctx, old, 1)
		require.NoError(t, err)
		stamped, err := c.Stamp(ctx, "g1-stamped")
		require.NoError(t, err)
		_, err = c.Add(ctx, stamped, 1)
		require.NoError(t, err)
		stale := newCounter(t, rc, Options{Prefix: c.opts.Prefix, Stripes: 2, DedupWindow: window})
		stale.layout.Store(mustLayout(t, c))

		for n := 3; n <= 4; n++ {
			_, err = c.Resize(ctx, n)
			require.NoError(t, err)
			_, err = c.Add(ctx, Event{ID: fmt.Sprintf("g%d", n-1), Time: time.Now()}, 1)
			require.NoError(t, err)
		}
		// Generations 1 and 2 are sealed, their stripes expire, and the document drops them.
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			_, err := c.Seal(ctx)
			require.NoError(ct, err)
			l, err := c.loadLayout(ctx)
			require.NoError(ct, err)
			require.Equal(ct, uint64(3), l.doc.Gens[0].Gen)
		}, 20*time.Second, 50*time.Millisecond)

		l := mustLayout(t, c)
		require.Len(t, l.doc.Gens, 1)
		require.Positive(t, l.doc.Floor)
		fields, err := rc.HKeys(ctx, c.keys.layout()).Result()
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"doc", "ver", "base", "pruned"}, fields, "no folded:/expiring: field is left")
		require.Equal(t, int64(4), mustSum(t, c))

		// Late attempts of the dropped generations are too old, through a fresh and a stale layout.
		_, err = c.Add(ctx, old, 1)
		require.ErrorIs(t, err, ErrTooOld)
		_, err = c.Add(ctx, stamped, 1)
		require.ErrorIs(t, err, ErrTooOld)
		_, err = stale.Add(ctx, stamped, 1)
		require.ErrorIs(t, err, ErrTooOld)
		// A writer holding the oldest layout still counts a fresh event.
		res, err := stale.Add(ctx, Event{ID: "fresh", Time: time.Now()}, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.Equal(t, uint64(3), res.Gen)
		// A sealer that froze generation 1 before it was dropped folds nothing now.
		reply, err := foldScript.Run(ctx, rc, []string{c.keys.layout()}, 1, 1).Int64Slice()
		require.NoError(t, err)
		require.Equal(t, []int64{2, 0}, reply)
		require.Equal(t, int64(5), mustSum(t, c))
	})
}
