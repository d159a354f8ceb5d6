package escrow

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestReleasesOnAStaleLedgerDoNotHideItFromItsWitness loses a's freeze and completion of T
// (an old copy of a's ledger comes back) while a's jobs keep releasing. Releases do not read
// the witness, so they must not move a's sequence back up to it: a's next grant must still
// find the ledger behind its witness, or a grants T's permits while b has them too.
func TestReleasesOnAStaleLedgerDoNotHideItFromItsWitness(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
		for _, job := range []string{"j1", "j2", "j3"} {
			_, err := p.Acquire(ctx, "a", job)
			require.NoError(t, err)
		}
		backup := copyLedger(t, c, p.ledgers["a"])
		require.NoError(t, p.Transfer(ctx, "a", "b", 2, "T")) // permits 4 and 5 move to b
		backup.restore(t, c, p.ledgers["a"])                  // a lost the freeze and the completion

		for _, job := range []string{"j1", "j2", "j3"} {
			require.NoError(t, p.Release(ctx, "a", job), "a release does not read the witness")
		}
		_, err := p.Acquire(ctx, "a", "next")
		require.ErrorIs(t, err, ErrFenced, "a is still behind its witness after the releases")
		require.NoError(t, p.Reconcile(ctx, "a"))
		rep := requireClean(t, p)
		require.Equal(t, 3, rep.Owners[0].Free, "a keeps 1..3; 4 and 5 are b's")
		require.Equal(t, 7, rep.Owners[1].Free)
	})
}

// TestTransferIDsOfDifferentSourcesDoNotCollide uses one transfer ID at two sources towards
// one target. Each source records its transfers on its own, so the target must tell them
// apart: a delivery of b's T is not a duplicate of a's T, and a refusal of a's U is not
// answered by b's accepted U. Otherwise the source completes a transfer whose permits never
// landed, and they are lost for good.
func TestTransferIDsOfDifferentSourcesDoNotCollide(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 9, Owners: owners(9, "a", "b", "c")})
		require.NoError(t, p.Transfer(ctx, "a", "c", 2, "T"))
		require.NoError(t, p.Transfer(ctx, "b", "c", 2, "T"))
		rep := requireClean(t, p)
		require.Equal(t, 7, rep.Owners[2].Free, "c gained both transfers")

		_, err := p.Freeze(ctx, "a", "c", 1, "U")
		require.NoError(t, err)
		require.NoError(t, p.Transfer(ctx, "b", "c", 1, "U"))
		require.NoError(t, p.Cancel(ctx, "a", "U"), "c never accepted a's U")
		rep = requireClean(t, p)
		require.Empty(t, rep.Pending)
		require.Equal(t, []int{1, 0, 8}, []int{rep.Owners[0].Free, rep.Owners[1].Free, rep.Owners[2].Free})
	})
}

// TestRecoverWitnessesTheFreezeItDelivers: the process that froze T died between the freeze
// script and the witness raise, and Recover delivers T to b. If a's master then loses the
// freeze, a must be found behind its witness; otherwise T's permits are free at a and at b.
func TestRecoverWitnessesTheFreezeItDelivers(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		opts := PoolOptions{Name: "p", Prefix: celebritytest.NewPrefix(t), Capacity: 10, Owners: owners(10, "a", "b")}
		p := newTestPool(t, c, opts)
		backup := copyLedger(t, c, p.ledgers["a"])
		r, err := runScript(ctx, c, freezeScript, p.ledgers["a"].keys, "T", "b", 2, 0)
		require.NoError(t, err)
		require.Equal(t, "ok", r.status, "frozen, and the process dies before raising the witness")

		inj := faults.New()
		recovering, err := NewPool(faultyClient(t, c, inj, -1), opts)
		require.NoError(t, err)
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: acceptScript.Hash()}, 1)
		rep, err := recovering.Recover(ctx)
		require.NoError(t, err)
		require.Len(t, rep.Pending, 1, "b accepted T, the reply was lost, T is not completed")
		require.Equal(t, int64(1), inj.Dropped())

		backup.restore(t, c, p.ledgers["a"]) // a's master loses the freeze
		_, err = p.Acquire(ctx, "a", "job")
		require.ErrorIs(t, err, ErrFenced, "Recover acted on the freeze, so it must be witnessed")
	})
}

// TestARefusalIsWitnessedBeforeTheSourceAborts: the process that made b refuse T died before
// raising b's witness, and Recover aborts T at a on b's answer. If b's master then loses the
// refusal, a late delivery of T must be fenced; otherwise T's permits land at b while a has
// them back.
func TestARefusalIsWitnessedBeforeTheSourceAborts(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
		f, err := p.Freeze(ctx, "a", "b", 2, "T")
		require.NoError(t, err)
		backup := copyLedger(t, c, p.ledgers["b"])
		r, err := runScript(ctx, c, refuseScript, p.ledgers["b"].keys, "T", "a", 0)
		require.NoError(t, err)
		require.Equal(t, "refused", r.status, "refused, and the process dies before raising the witness")

		rep, err := p.Recover(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"T"}, rep.Aborted)
		require.Equal(t, 5, freeAt(t, p, "a"))

		backup.restore(t, c, p.ledgers["b"]) // b's master loses the refusal
		require.ErrorIs(t, p.Deliver(ctx, f), ErrFenced, "a late delivery of T must not land")
		require.Equal(t, 5, freeAt(t, p, "b"))
	})
}

// TestAnAcceptAnsweredToCancelIsWitnessedBeforeTheSourceCompletes: the process that
// delivered T died before raising b's witness, and Cancel learns from b that T was accepted,
// so a completes T. If b's master then loses the accept, b must be fenced (Reconcile can then
// restore T at b); otherwise T's permits are gone from both owners for good.
func TestAnAcceptAnsweredToCancelIsWitnessedBeforeTheSourceCompletes(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
		f, err := p.Freeze(ctx, "a", "b", 2, "T")
		require.NoError(t, err)
		backup := copyLedger(t, c, p.ledgers["b"])
		r, err := runScript(ctx, c, acceptScript, p.ledgers["b"].keys, "T", "a", f.Seq, 0, f.Permits[0], f.Permits[1])
		require.NoError(t, err)
		require.Equal(t, "ok", r.status, "accepted, and the process dies before raising the witness")

		require.ErrorIs(t, p.Cancel(ctx, "a", "T"), ErrConflict, "b had accepted T: a completes it")
		backup.restore(t, c, p.ledgers["b"]) // b's master loses the accept
		_, err = p.Acquire(ctx, "b", "job")
		require.ErrorIs(t, err, ErrFenced, "b lost a write a acted on")
		require.NoError(t, p.Reconcile(ctx, "b"))
		rep := requireClean(t, p)
		require.Equal(t, 7, rep.Owners[1].Free, "T is restored at b")
	})
}
