package escrow

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// copyDir copies a folder with cp -a (the AOF folder of a stopped or live server).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	out, err := exec.Command("cp", "-a", from, to).CombinedOutput()
	require.NoError(t, err, string(out))
}

func TestLedgerRestoredFromAnOldAOFIsFenced(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	ledgers := srv.Client(t)
	witness := celebritytest.Standalone(t).Client(t) // another server: it does not share the restore
	p := newTestPool(t, ledgers, PoolOptions{Capacity: 10, Owners: owners(10, "a", "b"), Witness: witness})

	before, err := p.Acquire(ctx, "a", "before")
	require.NoError(t, err)
	aof := filepath.Join(srv.Dir(), "appendonlydir")
	backup := filepath.Join(t.TempDir(), "aof-backup")
	copyDir(t, aof, backup)

	require.NoError(t, p.Transfer(ctx, "a", "b", 4, "t1"))
	after, err := p.Acquire(ctx, "b", "after")
	require.NoError(t, err)
	require.Equal(t, 2, after.Permit, "b grants the lowest permit, which came from a")

	srv.Kill()
	require.NoError(t, os.RemoveAll(aof))
	copyDir(t, backup, aof)
	srv.Restart(t)

	// Both ledgers are back at the state before the transfer: a holds 2..5 free again.
	for _, owner := range []string{"a", "b"} {
		_, err = p.Acquire(ctx, owner, "x")
		require.ErrorIs(t, err, ErrFenced, owner)
		var fe *FencedError
		require.ErrorAs(t, err, &fe)
		require.Less(t, fe.LedgerSeq, fe.WitnessSeq)
	}
	_, err = p.Freeze(ctx, "a", "b", 1, "t2")
	require.ErrorIs(t, err, ErrFenced)
	require.ErrorIs(t, p.Release(ctx, "a", "before"), ErrFenced, "the fence is durable in the ledger")
	require.ErrorIs(t, p.Deliver(ctx, Frozen{ID: "t3", From: "a", To: "b", Permits: []int{2}, Seq: 1}), ErrFenced)
	rep, err := p.Audit(ctx)
	require.NoError(t, err)
	require.False(t, rep.Clean())
	require.Len(t, rep.Problems, 2, "both ledgers are reported fenced: %s", rep)
	require.GreaterOrEqual(t, p.Stats().Fenced, uint64(3))

	// Reconcile brings them back; the restored permits keep one place each.
	require.Error(t, p.Reconcile(ctx, "nobody"))
	require.NoError(t, p.Reconcile(ctx, "a"))
	require.NoError(t, p.Reconcile(ctx, "b"))
	require.Error(t, p.Reconcile(ctx, "a"), "a healthy ledger is not reconciled")
	rep = requireClean(t, p)
	require.Equal(t, 1, rep.Held, "only the grant from before the copy is known")

	// Permit 2 was granted by b before the restore and is lost from every ledger: it is
	// granted again, and its new token is above the lost holder's, so a downstream that
	// checks tokens rejects the lost holder.
	g, err := p.Acquire(ctx, "a", "again")
	require.NoError(t, err)
	require.Equal(t, 2, g.Permit)
	require.Greater(t, g.Token, after.Token)
	require.Greater(t, g.Token, before.Token)
	requireClean(t, p)
}

func TestFencedLedgerRefusesUntilReconciledOnCluster(t *testing.T) {
	// The same fence on the shared cluster: the witness is raised past the ledger by hand,
	// as a lost write would leave it.
	ctx := testkit.Ctx(t)
	c := celebritytest.SharedCluster(t).Client(t)
	p := newTestPool(t, c, PoolOptions{Capacity: 6, Owners: owners(6, "a", "b")})
	require.NoError(t, p.Transfer(ctx, "b", "a", 2, "t1"))
	require.NoError(t, c.ZAdd(ctx, p.WitnessKey("a"), redis.Z{Score: 1000, Member: "lost"}).Err())
	_, err := p.Acquire(ctx, "a", "job")
	require.ErrorIs(t, err, ErrFenced)
	_, err = p.Acquire(ctx, "b", "job")
	require.NoError(t, err, "other owners are not affected")
	require.NoError(t, p.Reconcile(ctx, "a"))
	g, err := p.Acquire(ctx, "a", "job")
	require.NoError(t, err)
	require.Greater(t, g.Token, int64(1000))
	requireClean(t, p)
}
