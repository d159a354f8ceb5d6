package escrow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestDeadHoldersPermitsComeBackWithoutAnAcquire: jobs die holding leased permits. Before the
// fix their permits came back only through the next Acquire at the same owner: a Transfer
// found the owner without free permits (ErrInsufficient), the Rebalancer saw nothing idle,
// Holders and Audit did not say which leases had lapsed, and there was no sweep. Now Holders
// marks them (Expired, Lapsed), Audit counts them, a Freeze takes them back before counting
// free permits, the Rebalancer sweeps before it reads, and Sweep takes them back on its own.
// The jobs at b run in a process configured without leases (they hold until Release), so b
// stays busy however long the test takes.
func TestDeadHoldersPermitsComeBackWithoutAnAcquire(t *testing.T) {
	const lease, skew = 100 * time.Millisecond, 50 * time.Millisecond
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	opts := PoolOptions{Name: "p", Prefix: celebritytest.NewPrefix(t), Capacity: 4, Owners: owners(4, "a", "b"), Lease: lease, LeaseSkew: skew}
	p := newTestPool(t, c, opts)
	lim := poolLimiter{p}
	noLeaseOpts := opts
	noLeaseOpts.Lease = 0
	unleased := newTestPool(t, c, noLeaseOpts)
	occ := newOccupancy(t, lim, 4)
	hold := func(pool *Pool, owner, job string) Grant {
		t.Helper()
		g, err := pool.Acquire(ctx, owner, job)
		require.NoError(t, err)
		occ.hold(job, g, time.Now)
		return g
	}
	// lapse waits until every lease of jobs at owner has ended more than the margin ago.
	lapse := func(owner string, jobs ...string) {
		t.Helper()
		for _, j := range jobs {
			awaitServerTime(t, c, leaseExpiry(t, c, p.ledgers[owner], j).Add(skew))
		}
		occ.check(ctx, "lapsed at "+owner)
	}

	hold(p, "a", "dead1")
	hold(p, "a", "dead2")
	hold(unleased, "b", "live1")
	hold(unleased, "b", "live2")
	lapse("a", "dead1", "dead2")
	hs, err := p.Holders(ctx, "a")
	require.NoError(t, err)
	require.Len(t, hs, 2)
	for _, h := range hs {
		require.Truef(t, h.Expired && h.Lapsed, "Holders marks %s's lease: %+v", h.Job, h)
	}
	hs, err = p.Holders(ctx, "b")
	require.NoError(t, err)
	for _, h := range hs {
		require.Falsef(t, h.Expired || h.Lapsed, "a grant without a lease never lapses: %+v", h)
	}
	rep := requireClean(t, p)
	require.Equal(t, 2, rep.Lapsed)
	require.Equal(t, []int{2, 0}, []int{rep.Owners[0].Lapsed, rep.Owners[1].Lapsed})
	require.Equal(t, 0, rep.Free, "a lapsed permit is held until it is taken back")

	require.NoError(t, p.Transfer(ctx, "a", "b", 2, "T1"), "the freeze takes the dead holders' permits back")
	require.Equal(t, uint64(2), p.Stats().Reclaimed)
	occ.check(ctx, "transferred")
	require.Equal(t, 2, freeAt(t, p, "b"))

	hold(p, "b", "dead3")
	hold(p, "b", "dead4")
	lapse("b", "dead3", "dead4")
	r, err := NewRebalancer(p, RebalanceOptions{Low: 0, Batch: 1, High: 2})
	require.NoError(t, err)
	moved, err := r.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, moved, "b's dead holders' permits are idle: one moves to a, which has none")
	occ.check(ctx, "rebalanced")
	require.Equal(t, 1, freeAt(t, p, "a"))
	require.Equal(t, uint64(4), p.Stats().Reclaimed)

	hold(p, "a", "dead5")
	lapse("a", "dead5")
	n, err := p.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	occ.drop("dead5")
	occ.check(ctx, "swept")
	hs, err = p.Holders(ctx, "a")
	require.NoError(t, err)
	require.Empty(t, hs)
	rep = requireClean(t, p)
	require.Zero(t, rep.Lapsed)
	require.Equal(t, 2, rep.Held, "live1 and live2")
	n, err = p.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a second sweep finds nothing")
	require.Equal(t, uint64(5), p.Stats().Reclaimed)

	cl := leasedKinds["central"](t, c, 2, lease, skew, time.Now).(centralLimiter)
	cocc := newOccupancy(t, cl, 2)
	g, err := cl.Acquire(ctx, "dead")
	require.NoError(t, err)
	cocc.hold("dead", g, time.Now)
	awaitServerTime(t, c, leaseExpiry(t, c, cl.l, "dead").Add(skew))
	cocc.check(ctx, "lapsed")
	hs, err = cl.Holders(ctx)
	require.NoError(t, err)
	require.Len(t, hs, 1)
	require.True(t, hs[0].Expired && hs[0].Lapsed)
	require.Equal(t, 1, requireClean(t, cl).Lapsed)
	n, err = cl.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	rep = requireClean(t, cl)
	require.Equal(t, 2, rep.Free)
	require.Equal(t, uint64(1), cl.Stats().Reclaimed)
	cocc.check(ctx, "swept")
}
