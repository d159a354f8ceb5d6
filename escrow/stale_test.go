package escrow

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/redistest"
)

// TestReleasesOnAStaleLedgerDoNotHideItFromItsWitness loses a's freeze and completion of T
// (an old copy of a's ledger comes back) while a's jobs keep releasing. Releases do not read
// the witness, so they must not move a's sequence back up to it: a's next grant must still
// find the ledger behind its witness, or a grants T's permits while b has them too.
func TestReleasesOnAStaleLedgerDoNotHideItFromItsWitness(t *testing.T) {
	redistest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testCtx(t)
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
	redistest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testCtx(t)
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
