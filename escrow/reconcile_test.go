package escrow

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// ledgerCopy is an old copy of one owner's ledger keys (DUMP payloads), standing for a
// restore of that owner's server from an old backup while the other owners keep their state.
type ledgerCopy map[string]string

func copyLedger(t *testing.T, c redis.UniversalClient, l ledger) ledgerCopy {
	t.Helper()
	cp := ledgerCopy{}
	c = celebritytest.AdminOf(t, c) // DUMP is not in the package's rule
	for _, k := range l.keys {
		v, err := c.Dump(testkit.Ctx(t), k).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		require.NoError(t, err)
		cp[k] = v
	}
	return cp
}

func (cp ledgerCopy) restore(t *testing.T, c redis.UniversalClient, l ledger) {
	t.Helper()
	ctx := testkit.Ctx(t)
	c = celebritytest.AdminOf(t, c) // RESTORE is not in the package's rule
	for _, k := range l.keys {
		if v, ok := cp[k]; ok {
			require.NoError(t, c.RestoreReplace(ctx, k, 0, v).Err())
		} else {
			require.NoError(t, c.Del(ctx, k).Err())
		}
	}
}

func TestReconcileCancelsAStaleFreezeWhosePermitsMovedOn(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
		old, err := p.Freeze(ctx, "a", "b", 2, "T1")
		require.NoError(t, err)
		backup := copyLedger(t, c, p.ledgers["a"])
		require.NoError(t, p.Cancel(ctx, "a", "T1"))
		require.NoError(t, p.Transfer(ctx, "a", "b", 2, "T2")) // the same permits 1 and 2 go to b
		backup.restore(t, c, p.ledgers["a"])                   // a is back to "T1 frozen, 1 and 2 in it"

		_, err = p.Acquire(ctx, "a", "job")
		require.ErrorIs(t, err, ErrFenced)
		require.NoError(t, p.Reconcile(ctx, "a"))
		rep := requireClean(t, p)
		require.Empty(t, rep.Pending, "the stale T1 was cancelled")
		require.Equal(t, 3, rep.Owners[0].Free)
		require.Equal(t, 7, rep.Owners[1].Free)
		require.ErrorIs(t, p.Deliver(ctx, old), ErrRefused, "the old T1 message can never land")
		rec, err := p.Recover(ctx)
		require.NoError(t, err)
		require.Empty(t, rec.Completed)
		require.Empty(t, rec.Aborted)
		requireClean(t, p)
	})
}

func TestReconcileRestoresAnAcceptedTransferTheTargetLost(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
		backup := copyLedger(t, c, p.ledgers["b"])
		require.NoError(t, p.Transfer(ctx, "a", "b", 3, "T"))
		backup.restore(t, c, p.ledgers["b"]) // b forgets it accepted T; a has completed T

		rep, err := p.Audit(ctx)
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3}, rep.Missing, "T's permits are nowhere: %s", rep)
		err = p.Deliver(ctx, Frozen{ID: "T", From: "a", To: "b", Permits: []int{1, 2, 3}, Seq: 1})
		require.ErrorIs(t, err, ErrFenced, "the stale target must not answer about T")
		require.NoError(t, p.Reconcile(ctx, "b"))
		rep = requireClean(t, p)
		require.Equal(t, 8, rep.Owners[1].Free)
		require.Equal(t, 2, rep.Owners[0].Free)
		require.NoError(t, p.Transfer(ctx, "a", "b", 3, "T"), "T stays done")
		requireClean(t, p)
	})
}

func TestReconcileScriptValidatesItsPlan(t *testing.T) {
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	p := newTestPool(t, c, PoolOptions{Capacity: 4, Owners: owners(4, "a", "b")})
	for _, plan := range []string{"", "nope", `{"drop":[0]}`, `{"drop":[5]}`, `{"add":[{"t":"","from":"b","p":[1]}]}`, `{"trim":[{"t":"x","p":["1"]}]}`} {
		_, err := runScript(ctx, c, reconcileScript, p.ledgers["a"].keys, 0, 4, 1, 2, plan)
		require.ErrorIs(t, err, ErrInvalid, plan)
	}
	requireClean(t, p)
}
