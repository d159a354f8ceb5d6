package escrow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRenewOnARestoredLedgerIsNotAcknowledged: a holder's lease ends while it is paused, the
// permit is granted again (confirmed by the witness), and the ledger's server is then
// restored from an AOF copy taken while the old holder still held the permit. The old holder
// resumes and renews: it must not be told it holds the permit (another job does, with a
// larger token); the restored ledger is fenced instead.
func TestRenewOnARestoredLedgerIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv, opts, _ := restoredPool(t)
	opts.Name = "lease"
	opts.Capacity = 2
	opts.Owners = owners(2, "a", "b")
	opts.Lease = 100 * time.Millisecond
	opts.LeaseSkew = 50 * time.Millisecond
	p := newTestPool(t, srv.Client(t), opts)
	old, err := p.Acquire(ctx, "a", "old")
	require.NoError(t, err)
	snap := srv.Snapshot(t)
	var next Grant
	require.Eventually(t, func() bool {
		next, err = p.Acquire(ctx, "a", "next")
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the permit comes back after lease and skew")
	require.Equal(t, old.Permit, next.Permit)

	srv.RestoreSnapshot(t, snap)
	exp, err := p.Renew(ctx, "a", "old")
	require.Error(t, err, "the old holder was told it holds permit %d until %v; job next holds it with token %d > %d",
		old.Permit, exp, next.Token, old.Token)
	require.ErrorIs(t, err, ErrFenced)
	require.ErrorIs(t, p.Release(ctx, "a", "old"), ErrFenced, "the restored ledger stays fenced")
	require.NoError(t, p.Reconcile(ctx, "a"))
	requireClean(t, p)
}
