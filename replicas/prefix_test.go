package replicas_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestPrefixesAreSeparateCaches: the prefix names a cache, primary record included, so two
// instances configured with different prefixes never share a record whose registry names
// copies under the other's prefix. Neither ever reads a version older than one its own
// cache acknowledged, and each loads a missing key through its own lease.
func TestPrefixesAreSeparateCaches(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.Prefix(t) + "post:7"
		a := newReplicator(t, f.client(t), replicas.Options{Prefix: celebritytest.Prefix(t), Hot: []string{key}})
		b := newReplicator(t, f.client(t), replicas.Options{Prefix: celebritytest.Prefix(t), Hot: []string{key}})
		ctx := ctxFor(t)
		require.NoError(t, a.Set(ctx, key, []byte("v1"), 1, time.Minute))
		_, err := b.Get(ctx, key)
		require.ErrorIs(t, err, replicas.ErrNotFound, "b's cache holds nothing yet")
		require.NoError(t, b.Set(ctx, key, []byte("b1"), 1, time.Minute))
		require.Equal(t, map[string]int{"b1": 20}, hotReads(t, b, key, 20))

		// a's writes never leave b reading an older version of b's own writes, and b's
		// copies are kept by b's writes alone.
		require.NoError(t, a.Set(ctx, key, []byte("v2"), 2, time.Minute))
		require.Equal(t, map[string]int{"v2": 20}, hotReads(t, a, key, 20))
		require.Equal(t, map[string]int{"b1": 20}, hotReads(t, b, key, 20))
		require.NoError(t, b.Set(ctx, key, []byte("b2"), 2, time.Minute))
		require.Equal(t, map[string]int{"b2": 20}, hotReads(t, b, key, 20))
		require.NoError(t, b.Delete(ctx, key, 3))
		require.Equal(t, map[string]int{"miss": 20}, hotReads(t, b, key, 20))
		require.Equal(t, map[string]int{"v2": 20}, hotReads(t, a, key, 20))
		_, err = a.Get(ctx, key)
		require.False(t, errors.Is(err, replicas.ErrNotFound))
	})
}
