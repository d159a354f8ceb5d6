package replicas_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"

	"github.com/redis/go-redis/v9"
)

func TestOlderSetNeverOverwritesNewer(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		c := f.client(t)
		key := celebritytest.NewPrefix(t) + "post:ronaldo"
		r := newReplicator(t, c, replicas.Options{Copies: 3, Hot: []string{key}})
		ctx := testkit.Ctx(t)
		require.NoError(t, r.Set(ctx, key, []byte("v5"), 5, 0))

		err := r.Set(ctx, key, []byte("v4"), 4, 0)
		require.ErrorIs(t, err, replicas.ErrStaleVersion)
		// A Set of version 4 whose copy writes were delayed in flight reaches the copies
		// after version 5: every copy refuses it.
		require.NoError(t, r.WriteCopiesOnly(ctx, key, []byte("v4"), 4, false))

		ck, err := r.CopyKeys(ctx, key)
		require.NoError(t, err)
		for _, k := range append(ck, r.PrimaryKey(key)) {
			v, tomb, data := stored(t, c, k)
			require.Equal(t, uint64(5), v, k)
			require.False(t, tomb, k)
			require.Equal(t, "v5", data, k)
		}
		it, err := r.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, replicas.Item{Value: []byte("v5"), Version: 5}, it)
		require.Equal(t, uint64(1), r.Stats().StaleWrites)
	})
}

func TestDeleteThenOlderSetStaysDeleted(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		c := f.client(t)
		key := celebritytest.NewPrefix(t) + "k"
		r := newReplicator(t, c, replicas.Options{Copies: 3, Hot: []string{key}})
		ctx := testkit.Ctx(t)
		require.NoError(t, r.Set(ctx, key, []byte("old"), 5, 0))
		require.NoError(t, r.Delete(ctx, key, 6))

		// The late Set of the version that was current before the Delete, and one of the
		// Delete's own version.
		require.ErrorIs(t, r.Set(ctx, key, []byte("old"), 5, 0), replicas.ErrStaleVersion)
		require.ErrorIs(t, r.Set(ctx, key, []byte("same"), 6, 0), replicas.ErrConflict)
		require.NoError(t, r.WriteCopiesOnly(ctx, key, []byte("old"), 5, false))
		require.ErrorIs(t, r.WriteCopiesOnly(ctx, key, []byte("same"), 6, false), replicas.ErrConflict)

		_, err := r.Get(ctx, key)
		require.ErrorIs(t, err, replicas.ErrNotFound)
		ck, err := r.CopyKeys(ctx, key)
		require.NoError(t, err)
		for _, k := range append(ck, r.PrimaryKey(key)) {
			v, tomb, _ := stored(t, c, k)
			require.Equal(t, uint64(6), v, k)
			require.True(t, tomb, k)
		}
		// A newer version brings the key back.
		require.NoError(t, r.Set(ctx, key, []byte("new"), 7, 0))
		it, err := r.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, "new", string(it.Value))
	})
}

func TestSameVersionIsAnIdempotentRetryAndOtherContentAConflict(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		c := f.client(t)
		key := celebritytest.NewPrefix(t) + "k"
		r := newReplicator(t, c, replicas.Options{Hot: []string{key}})
		ctx := testkit.Ctx(t)
		require.NoError(t, r.Set(ctx, key, []byte("a"), 3, 0))
		require.NoError(t, r.Set(ctx, key, []byte("a"), 3, 0), "the same content again is a retry")
		// The same version with other bytes, or with the other kind, is a conflict.
		err := r.Set(ctx, key, []byte("other"), 3, 0)
		require.ErrorIs(t, err, replicas.ErrConflict)
		require.NotErrorIs(t, err, replicas.ErrStaleVersion)
		err = r.Delete(ctx, key, 3)
		require.ErrorIs(t, err, replicas.ErrConflict)
		require.NotContains(t, err.Error(), "newer version", "nothing newer is stored")
		require.Equal(t, uint64(0), r.Stats().StaleWrites)
		require.Equal(t, uint64(2), r.Stats().Conflicts)
		it, err := r.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, replicas.Item{Value: []byte("a"), Version: 3}, it)
		ck, err := r.CopyKeys(ctx, key)
		require.NoError(t, err)
		for _, k := range append(ck, r.PrimaryKey(key)) {
			v, tomb, data := stored(t, c, k)
			require.Equal(t, uint64(3), v, k)
			require.False(t, tomb, k)
			require.Equal(t, "a", data, k)
		}
		// Version 4 lives 1ms, but the copies registered for an hour keep it as a version
		// floor: a fill that loads other content under version 4 is a conflict too, and the
		// same content is a fill.
		require.NoError(t, r.Set(ctx, key, []byte("four"), 4, time.Millisecond))
		require.Eventually(t, func() bool {
			_, err := r.Get(ctx, key)
			return errors.Is(err, replicas.ErrNotFound)
		}, 30*time.Second, 5*time.Millisecond)
		_, err = r.GetOrLoad(ctx, key, 0, func(context.Context, string) (replicas.Item, error) {
			return replicas.Item{Value: []byte("not four"), Version: 4}, nil
		})
		require.ErrorIs(t, err, replicas.ErrConflict)
		it, err = r.GetOrLoad(ctx, key, 0, func(context.Context, string) (replicas.Item, error) {
			return replicas.Item{Value: []byte("four"), Version: 4}, nil
		})
		require.NoError(t, err)
		require.Equal(t, replicas.Item{Value: []byte("four"), Version: 4}, it)
	})
}

func TestSetWithLostRepliesIsAppliedOnce(t *testing.T) {
	inj := faults.New()
	c := celebritytest.SharedCluster(t).Client(t, func(o *redis.ClusterOptions) { o.Dialer = inj.Dialer(nil) })
	key := celebritytest.NewPrefix(t) + "k"
	r := newReplicator(t, c, replicas.Options{Copies: 3, Hot: []string{key}})
	ctx := testkit.Ctx(t)
	ck, err := r.CopyKeys(ctx, key)
	require.NoError(t, err)
	require.NoError(t, r.Set(ctx, key, []byte("warm"), 1, 0)) // scripts loaded, connections open
	// The reply to the logical key's write and to one copy's write are lost (the first rule
	// is used up by the logical key's write, which comes first; the second names the copy
	// only). The retries find their version already stored.
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: key}, 1)
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: ck[0]}, 1)
	err = r.Set(ctx, key, []byte("v2"), 2, 0)
	if err != nil {
		// A pipelined copy write is not retried by go-redis: it is reported, and the Set is
		// retried with the same version.
		var pw *replicas.PartialWriteError
		require.ErrorAs(t, err, &pw)
		require.NoError(t, r.Set(ctx, key, []byte("v2"), 2, 0))
	}
	require.Equal(t, int64(2), inj.Dropped())
	for _, k := range append(ck, r.PrimaryKey(key)) {
		v, _, data := stored(t, c, k)
		require.Equal(t, uint64(2), v, k)
		require.Equal(t, "v2", data, k)
	}
}

func TestBadInput(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	for _, tc := range []struct {
		name string
		o    replicas.Options
		want string
	}{
		{"copies negative", replicas.Options{Copies: -1}, "Options.Copies must be 1..32, got -1"},
		{"copies too many", replicas.Options{Copies: 33}, "Options.Copies must be 1..32, got 33"},
		{"prefix with brace", replicas.Options{Prefix: "a{b"}, "Options.Prefix"},
		{"empty hot key", replicas.Options{Hot: []string{""}}, "Options.Hot"},
		{"jitter", replicas.Options{Jitter: 0.9}, "Options.Jitter"},
		{"lease", replicas.Options{LeaseTTL: -1}, "Options.LeaseTTL"},
		{"refresh", replicas.Options{RefreshInterval: 1}, "Options.RefreshInterval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := replicas.New(c, tc.o)
			require.ErrorIs(t, err, replicas.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := replicas.New(nil, replicas.Options{})
	require.Error(t, err)

	r := newReplicator(t, c, replicas.Options{})
	ctx := context.Background()
	key := celebritytest.NewPrefix(t) + "k"
	load := func(context.Context, string) (replicas.Item, error) { return replicas.Item{}, errors.New("unused") }
	require.ErrorContains(t, r.Set(ctx, key, nil, 1, -1), "ttl")
	require.ErrorContains(t, r.Set(ctx, "", nil, 1, 0), "key must not be empty")
	_, err = r.Get(ctx, "")
	require.Error(t, err)
	require.Error(t, r.Delete(ctx, "", 1))
	require.Error(t, r.Promote(ctx, ""))
	require.Error(t, r.Demote(ctx, ""))
	_, err = r.GetOrLoad(ctx, key, -1, load)
	require.ErrorContains(t, err, "ttl")
	_, err = r.GetOrLoad(ctx, key, 0, nil)
	require.Error(t, err)
	// Nothing half-applied: the rejected calls wrote nothing.
	n, err := celebritytest.AdminOf(t, c).Exists(ctx, key, r.PrimaryKey(key)).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestForeignValueIsReported(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	p := celebritytest.NewPrefix(t)
	r := newReplicator(t, c, replicas.Options{})
	// Something else wrote under the package's own prefix.
	require.NoError(t, c.Set(testkit.Ctx(t), r.PrimaryKey(p+"plain"), "not ours", 0).Err())
	_, err := r.Get(testkit.Ctx(t), p+"plain")
	require.ErrorIs(t, err, replicas.ErrCorrupt)
}
