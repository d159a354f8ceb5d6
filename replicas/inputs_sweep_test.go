package replicas_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/replicas"
)

// sweepKeys are the keys an acceptance suite probes with: every one of them but the empty key
// must round-trip byte for byte, and keys that a mangling encoder would merge stay apart.
var sweepKeys = []string{
	"\xff\xfe", "\ufffd", "a\x00b", "a", "a:b", "a_b", "{", "}", "{x}", "x", "k",
	strings.Repeat("m", 1<<20),
}

// TestKeysRoundTripLosslessly writes, promotes and reads back each key through a second
// Replicator with a cold state, on standalone and on the cluster: every key reads its own
// value, and the empty key is refused naming the key without a write.
func TestKeysRoundTripLosslessly(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		ctx := t.Context()
		p := celebritytest.NewPrefix(t)
		w := newReplicator(t, f.client(t), replicas.Options{Prefix: p})
		r := newReplicator(t, f.client(t), replicas.Options{Prefix: p})
		for i, k := range sweepKeys {
			require.NoError(t, w.Set(ctx, k, []byte{byte(i)}, 1, 0), "key %.20q", k)
			require.NoError(t, w.Promote(ctx, k), "key %.20q", k)
		}
		for i, k := range sweepKeys {
			it, err := r.Get(ctx, k)
			require.NoError(t, err, "key %.20q", k)
			require.Equal(t, []byte{byte(i)}, it.Value, "key %.20q", k)
			it, err = w.Get(ctx, k) // from a copy
			require.NoError(t, err, "key %.20q", k)
			require.Equal(t, []byte{byte(i)}, it.Value, "key %.20q copy", k)
		}
	})
}

// TestEmptyKeyRefusedWithoutWrite checks every entry point that takes a key.
func TestEmptyKeyRefusedWithoutWrite(t *testing.T) {
	srv := celebritytest.Standalone(t)
	c := srv.Client(t)
	ctx := t.Context()
	p := celebritytest.NewPrefix(t)
	r := newReplicator(t, c, replicas.Options{Prefix: p})
	load := func(ctx2 context.Context, _ string) (replicas.Item, error) {
		return replicas.Item{Value: []byte("v"), Version: 1}, nil
	}
	_, gerr := r.Get(ctx, "")
	_, lerr := r.GetOrLoad(ctx, "", 0, load)
	for name, err := range map[string]error{
		"Set": r.Set(ctx, "", []byte("v"), 1, 0), "Delete": r.Delete(ctx, "", 1),
		"Promote": r.Promote(ctx, ""), "Demote": r.Demote(ctx, ""), "Get": gerr, "GetOrLoad": lerr,
	} {
		require.ErrorIs(t, err, replicas.ErrInvalid, name)
		require.ErrorContains(t, err, "key", name)
	}
	keys, _, err := celebritytest.AdminOf(t, c).Scan(ctx, 0, p+"*", 1000).Result()
	require.NoError(t, err)
	require.Empty(t, keys, "a refused call writes nothing")
}
