package replicas_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/redistest"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestCopyTombstonesLastTheTombstoneTTL checks that the copies keep Delete's tombstone as
// long as the logical key does: TTL jitter spreads the expiry of values, but a tombstone
// that leaves a copy early lets a late copy write of an older Set resurrect the value there
// while the logical key still says deleted.
func TestCopyTombstonesLastTheTombstoneTTL(t *testing.T) {
	t.Parallel()
	c := redistest.Standalone(t).Client(t)
	key := redistest.Prefix(t) + "k"
	const tombTTL = 6 * time.Second
	// The largest jitter, always drawn in full.
	r := newReplicator(t, c, replicas.Options{Copies: 3, Hot: []string{key}, TombstoneTTL: tombTTL,
		Jitter: 0.5, Rand: func() uint64 { return math.MaxUint64 }})
	ctx := ctxFor(t)
	require.NoError(t, r.Set(ctx, key, []byte("old"), 5, 0))
	require.NoError(t, r.Delete(ctx, key, 6))

	// Past half the tombstone's life, the logical key still refuses version 5...
	require.Eventually(t, func() bool {
		left, err := c.PTTL(context.Background(), key).Result()
		require.NoError(t, err)
		return left < tombTTL/2-500*time.Millisecond
	}, 2*tombTTL, 20*time.Millisecond)
	require.ErrorIs(t, r.Set(ctx, key, []byte("old"), 5, 0), replicas.ErrStaleVersion)
	// ...and so must every copy: version 5's copy writes, delayed in flight, arrive now.
	require.NoError(t, r.WriteCopiesOnly(ctx, key, []byte("old"), 5, false))

	left, err := c.PTTL(ctx, key).Result()
	require.NoError(t, err)
	require.Positive(t, left, "the logical tombstone must still be there for this check")
	ck, err := r.CopyKeys(ctx, key)
	require.NoError(t, err)
	for _, k := range ck {
		v, tomb, _ := stored(t, c, k)
		require.True(t, tomb, "copy %s resurrected version %d inside the tombstone TTL", k, v)
		require.Equal(t, uint64(6), v, k)
	}
	_, err = r.Get(ctx, key)
	require.ErrorIs(t, err, replicas.ErrNotFound)
}
