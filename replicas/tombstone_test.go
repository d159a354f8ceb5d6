package replicas_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestCopyTombstonesLastTheTombstoneTTL checks that the copies keep Delete's tombstone as
// long as the logical key does: TTL jitter spreads the expiry of values, but a tombstone
// that leaves a copy early lets a late copy write of an older Set resurrect the value there
// while the logical key still says deleted.
func TestCopyTombstonesLastTheTombstoneTTL(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel()
	c := celebritytest.Standalone(t).Client(t)
	key := celebritytest.NewPrefix(t) + "k"
	const tombTTL = 6 * time.Second
	// The largest jitter, always drawn in full.
	r := newReplicator(t, c, replicas.Options{Copies: 3, Hot: []string{key}, TombstoneTTL: tombTTL,
		Jitter: 0.5, Rand: func() uint64 { return math.MaxUint64 }})
	ctx := testkit.Ctx(t)
	require.NoError(t, r.Set(ctx, key, []byte("old"), 5, 0))
	// clock expires with the tombstone's own TTL (the logical tombstone may last longer).
	clock := celebritytest.NewPrefix(t) + "clock"
	require.NoError(t, c.Set(ctx, clock, "x", tombTTL).Err())
	require.NoError(t, r.Delete(ctx, key, 6))

	// Past half the tombstone's life, the logical key still refuses version 5...
	require.Eventually(t, func() bool {
		left, err := c.PTTL(context.Background(), clock).Result()
		return err == nil && left < tombTTL/2-500*time.Millisecond
	}, 2*tombTTL, 20*time.Millisecond)
	require.ErrorIs(t, r.Set(ctx, key, []byte("old"), 5, 0), replicas.ErrStaleVersion)
	// ...and so must every copy: version 5's copy writes, delayed in flight, arrive now.
	require.NoError(t, r.WriteCopiesOnly(ctx, key, []byte("old"), 5, false))

	left, err := c.PTTL(ctx, clock).Result()
	require.NoError(t, err)
	require.Positive(t, left, "the tombstone TTL must not be over yet for this check")
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

// TestDeleteKeepsTrackingACopyItCouldNotReach checks that a tombstone keeps the
// registration of a copy that missed it: that copy still holds the deleted value with the
// value's long TTL, and if the registry went away with a short tombstone, no later write
// would reach the copy and hot readers would serve the deleted value until it expired.
func TestDeleteKeepsTrackingACopyItCouldNotReach(t *testing.T) {
	inj := faults.New()
	cl := celebritytest.SharedCluster(t)
	c := cl.Client(t, func(o *redis.ClusterOptions) {
		o.Dialer = inj.Dialer(nil)
		o.ReadTimeout, o.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
		o.MaxRetries, o.MaxRedirects = -1, -1
	})
	key := celebritytest.NewPrefix(t) + "k"
	prefix := celebritytest.NewPrefix(t)
	r := newReplicator(t, c, replicas.Options{Copies: 3, Prefix: prefix, Hot: []string{key},
		TombstoneTTL: 2 * time.Second, RefreshInterval: -1})
	ctx := testkit.Ctx(t)
	require.NoError(t, r.Set(ctx, key, []byte("old"), 5, time.Hour))
	ck, err := r.CopyKeys(ctx, key)
	require.NoError(t, err)
	j := -1
	for i, k := range ck {
		if cl.MasterOf(k) != cl.MasterOf(key) {
			j = i
		}
	}
	require.GreaterOrEqual(t, j, 0)
	addr := cl.MasterOf(ck[j]).Addr()

	inj.BlackholeAddr(addr, true)
	err = r.Delete(ctx, key, 6)
	var pw *replicas.PartialWriteError
	require.ErrorAs(t, err, &pw)
	require.Len(t, pw.Failed, 1)
	require.Equal(t, ck[j], pw.Failed[0].Key)
	inj.BlackholeAddr(addr, false)
	inj.ResetAll()

	plain := cl.AdminClient(t) // for inspection, without faults (PEXPIRETIME is not in the rule)
	v, tomb, _ := stored(t, plain, ck[j])
	require.Equal(t, uint64(5), v, "the unreachable copy kept the deleted value")
	require.False(t, tomb)
	copyLeft, err := plain.PExpireTime(ctx, ck[j]).Result()
	require.NoError(t, err)
	keyLeft, err := plain.PExpireTime(ctx, r.PrimaryKey(key)).Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, keyLeft, copyLeft,
		"the tombstone (and its registry) must outlive every copy registered at the key")

	// A writer that does not know the key is hot still reaches that copy.
	w := newReplicator(t, plain, replicas.Options{Copies: 3, Prefix: prefix})
	require.NoError(t, w.Set(ctx, key, []byte("new"), 7, time.Hour))
	v, _, data := stored(t, plain, ck[j])
	require.Equal(t, uint64(7), v)
	require.Equal(t, "new", data)
}
