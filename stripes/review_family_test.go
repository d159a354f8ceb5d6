package stripes

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

// A resizer that stopped after closing the old generation (the new one still pending)
// leaves events counted in the pending generation's stripes. If such a stripe is lost, the
// next Seal or Resize finishing the resize must not create it again from zero: the events
// it held would be lost and their retries counted again.
func TestReviewLostPendingStripeIsNotRecreated(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := context.Background()
		c := newCounter(t, rc, Options{Stripes: 1})
		require.Zero(t, mustSum(t, c))
		announce(t, c, 1)
		l := mustLayout(t, c)
		next := l.doc.Gens[1]
		require.NoError(t, c.createStripes(ctx, &next))
		_, err := c.pipeline(ctx, closeScript, 1, func(i int) (string, []any) {
			return c.keys.stripe(l.doc.Gens[0].Tags[i], 1, i), []any{1, next.Start}
		})
		require.NoError(t, err)
		ev := Event{ID: "in-pending", Time: time.UnixMilli(next.Start + 10)}
		res, err := c.Add(ctx, ev, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.Equal(t, uint64(2), res.Gen)
		// The stripe's master loses it: the stripe hash and its dedup sets.
		key := c.keys.stripe(next.Tags[0], 2, 0)
		node := nodeFor(t, rc, key)
		lost, err := node.Keys(ctx, key+"*").Result()
		require.NoError(t, err)
		require.NoError(t, node.Del(ctx, lost...).Err())

		_, err = c.Seal(ctx) // would finish the resize
		require.ErrorIs(t, err, ErrVanished, "Seal finishing the resize")
		_, err = c.Resize(ctx, 3)
		require.ErrorIs(t, err, ErrVanished, "Resize finishing the resize")
		_, err = c.Sum(ctx)
		require.ErrorIs(t, err, ErrVanished, "Sum after a stripe holding a counted event was lost")
		res, err = c.Add(ctx, ev, 1)
		require.ErrorIs(t, err, ErrVanished, "a retry of the lost stripe's event")
		require.False(t, res.Applied)
		n, err := node.Exists(ctx, key).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the lost stripe was not created again")
	})
}
