package escrow

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

func TestOwnersGrantOnlyTheirOwnPermits(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 10, Owners: []Owner{{"a", 1, 4}, {"b", 5, 10}}})
		for i := range 4 {
			g, err := p.Acquire(ctx, "a", fmt.Sprint("j", i))
			require.NoError(t, err)
			require.Equal(t, "a", g.Owner)
			require.True(t, g.Permit >= 1 && g.Permit <= 4, "a granted permit %d", g.Permit)
		}
		_, err := p.Acquire(ctx, "a", "j4")
		require.ErrorIs(t, err, ErrExhausted, "idle permits at b must not help a")
		g, err := p.Acquire(ctx, "b", "j4")
		require.NoError(t, err)
		require.True(t, g.Permit >= 5 && g.Permit <= 10)
		rep := requireClean(t, p)
		require.Equal(t, 5, rep.Held)
		require.Equal(t, 5, rep.Free)

		_, err = p.Acquire(ctx, "nobody", "j")
		require.ErrorIs(t, err, ErrUnknownOwner)
		require.ErrorIs(t, p.Release(ctx, "nobody", "j"), ErrUnknownOwner)
		_, err = p.Acquire(ctx, "a", "")
		require.ErrorIs(t, err, ErrInvalid)
	})
}

func TestPoolGrantIsWitnessedBeforeItIsReturned(t *testing.T) {
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	p := newTestPool(t, c, PoolOptions{Capacity: 4, Owners: owners(4, "a", "b")})
	g, err := p.Acquire(ctx, "a", "job")
	require.NoError(t, err)
	w, err := p.readWitness(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, g.Token, w, "the witness must hold the sequence of the acknowledged grant")
	again, err := p.Acquire(ctx, "a", "job")
	require.NoError(t, err)
	require.Equal(t, g.Permit, again.Permit)
	require.True(t, again.Replayed)
	require.NoError(t, p.Release(ctx, "a", "job"))
	require.NoError(t, p.Release(ctx, "a", "job"), "a replayed release reports the release again")
	rep := requireClean(t, p)
	require.Equal(t, 4, rep.Free)
	require.Equal(t, Stats{Acquired: 1, Replayed: 1, Released: 1, NoopReleases: 1}, p.Stats())
}

func TestInitIsIdempotentAndChecksTheLayout(t *testing.T) {
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	prefix := celebritytest.NewPrefix(t)
	opts := PoolOptions{Name: "p", Prefix: prefix, Capacity: 6, Owners: owners(6, "a", "b"), AllowWeakDurability: true, AllowSharedWitness: true}
	p := newTestPool(t, c, opts)
	_, err := p.Acquire(ctx, "a", "job")
	require.NoError(t, err)
	again := newTestPool(t, c, opts) // a second process
	g, err := again.Acquire(ctx, "a", "job")
	require.NoError(t, err)
	require.True(t, g.Replayed)
	require.Equal(t, 5, requireClean(t, again).Free)

	moved := opts
	moved.Owners = []Owner{{"a", 1, 2}, {"b", 3, 6}}
	other, err := NewPool(c, moved)
	require.NoError(t, err)
	require.ErrorIs(t, other.Init(ctx), ErrLayoutMismatch)
}

func TestLostLedgerIsNeverRecreatedFromItsInitialRange(t *testing.T) {
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	opts := PoolOptions{Name: "p", Prefix: celebritytest.NewPrefix(t), Capacity: 6, Owners: owners(6, "a", "b"), AllowWeakDurability: true, AllowSharedWitness: true}
	p := newTestPool(t, c, opts)
	require.NoError(t, p.Transfer(ctx, "a", "b", 2, "t1"))
	// The ledger of a disappears (eviction, FLUSHDB, a wrong restore); its witness remains.
	require.NoError(t, c.Del(ctx, p.ledgers["a"].keys...).Err())
	again, err := NewPool(c, opts)
	require.NoError(t, err)
	require.ErrorIs(t, again.Init(ctx), ErrLedgerMissing)
	_, err = again.Acquire(ctx, "a", "job")
	require.ErrorIs(t, err, ErrLedgerMissing, "Init must not resurrect a's permits 1..3")
	rep, err := again.Audit(ctx)
	require.NoError(t, err)
	require.False(t, rep.Clean())
	require.Equal(t, []int{3}, rep.Missing, "permits 1 and 2 went to b; 3 was lost with the ledger")

	require.NoError(t, again.Reconcile(ctx, "a"))
	rep, err = again.Audit(ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Duplicated, "reconcile must not duplicate")
	require.Equal(t, []int{3}, rep.Missing, "reconcile cannot know who held permit 3; it stays out")
	_, err = again.Acquire(ctx, "a", "job")
	require.ErrorIs(t, err, ErrExhausted)

	// The operator confirms that permit 3's holder is gone and puts it back, once.
	restored, err := again.RestoreLost(ctx, "a", "ops-1")
	require.NoError(t, err)
	require.Equal(t, []int{3}, restored)
	restored, err = again.RestoreLost(ctx, "a", "ops-1")
	require.NoError(t, err)
	require.Empty(t, restored)
	require.Equal(t, uint64(1), again.Stats().Restored)
	rep = requireClean(t, again)
	require.Equal(t, 1, rep.Owners[0].Free)
	g, err := again.Acquire(ctx, "a", "job")
	require.NoError(t, err)
	require.Equal(t, 3, g.Permit)
	require.Greater(t, g.Token, rep.Owners[1].Witness, "above every token granted before")
	requireClean(t, again)
}
