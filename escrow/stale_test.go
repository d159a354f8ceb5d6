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
