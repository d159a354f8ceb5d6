package stripes

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// A dedup record is found only under the settings it was written with: the slice width
// names its set, the window sets its expiry and the bit width is the record itself. A
// process configured differently (a rolling deploy that changes DedupWindow) would not
// find the records of the others and count their retries again, so it is refused.
func TestDifferentDedupSettingsAreRefused(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		prefix := celebritytest.NewPrefix(t)
		ctx := context.Background()
		a := newCounter(t, rc, Options{Prefix: prefix, DedupWindow: 10 * time.Minute})
		ev := Event{ID: "e", Time: time.Now()}
		res, err := a.Add(ctx, ev, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)

		for _, tc := range []struct {
			o     Options
			field string
		}{
			{Options{Prefix: prefix, DedupWindow: time.Minute}, "Options.DedupWindow"},
			{Options{Prefix: prefix, DedupWindow: 10 * time.Minute, DedupSlices: 40}, "Options.DedupSlices"},
			{Options{Prefix: prefix, DedupWindow: 10 * time.Minute, DedupBits: 31}, "Options.DedupBits"},
		} {
			b := newCounter(t, rc, tc.o)
			res, err := b.Add(ctx, ev, 1) // a retry through the differently configured process
			require.ErrorIs(t, err, ErrInvalid, tc.field)
			require.ErrorContains(t, err, tc.field)
			require.False(t, res.Applied, tc.field)
			_, err = b.Resize(ctx, 8)
			require.ErrorIs(t, err, ErrInvalid, tc.field)
		}
		require.Equal(t, int64(1), mustSum(t, a), "the retries changed nothing")

		// Settings that do not change where records live may differ.
		same := newCounter(t, rc, Options{Prefix: prefix, DedupWindow: 10 * time.Minute, SetMembers: 64, Stripes: 9})
		res, err = same.Add(ctx, ev, 1)
		require.NoError(t, err)
		require.False(t, res.Applied)
		require.Len(t, mustLayout(t, a).doc.Gens, 1)
	})
}
