package escrow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestLeasedPermitOfADeadHolderIsReissuedWithAHigherToken: a job acquires with a lease and
// dies without Release. Its permit is not granted again while the lease plus the skew
// margin runs, and then it is, with a larger token, so a downstream that checks tokens
// refuses the dead holder if it was only paused. The old holder's Renew and Release get
// ErrNotHeld.
func TestLeasedPermitOfADeadHolderIsReissuedWithAHigherToken(t *testing.T) {
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	p := newTestPool(t, c, PoolOptions{Capacity: 1, Owners: owners(1, "a"), Lease: 50 * time.Millisecond, LeaseSkew: 50 * time.Millisecond})
	dead, err := p.Acquire(ctx, "a", "dead")
	require.NoError(t, err)
	require.False(t, dead.Expires.IsZero())
	var g Grant
	require.Eventually(t, func() bool {
		g, err = p.Acquire(ctx, "a", "next")
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the permit comes back after lease and skew")
	require.Equal(t, dead.Permit, g.Permit)
	require.Greater(t, g.Token, dead.Token)
	_, err = p.Renew(ctx, "a", "dead")
	require.ErrorIs(t, err, ErrNotHeld, "a reclaimed holder cannot renew")
	require.ErrorIs(t, p.Release(ctx, "a", "dead"), ErrNotHeld)
	hs, err := p.Holders(ctx, "a")
	require.NoError(t, err)
	require.Len(t, hs, 1)
	require.Equal(t, "next", hs[0].Job)
	require.Equal(t, g.Token, hs[0].Token)
	requireClean(t, p)

	cl, err := NewCentral(c, CentralOptions{Name: "l", Capacity: 1, Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true,
		Lease: 50 * time.Millisecond, LeaseSkew: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx))
	old, err := cl.Acquire(ctx, "dead")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		g, err = cl.Acquire(ctx, "next")
		return err == nil
	}, 30*time.Second, 20*time.Millisecond)
	require.Greater(t, g.Token, old.Token)
	requireClean(t, cl)
}

// TestRenewedLeaseKeepsThePermit: while the lease plus the margin runs the permit stays with
// its holder; Renew moves the expiry forward; Holders lists job, permit, token and expiry;
// a release at the wrong owner, or of a job holding nothing, is ErrNotHeld.
func TestRenewedLeaseKeepsThePermit(t *testing.T) {
	ctx := testkit.Ctx(t)
	p := newTestPool(t, celebritytest.Standalone(t).Client(t), PoolOptions{Capacity: 2, Owners: owners(2, "a", "b"), Lease: time.Minute})
	g, err := p.Acquire(ctx, "a", "job")
	require.NoError(t, err)
	_, err = p.Acquire(ctx, "a", "other")
	require.ErrorIs(t, err, ErrExhausted, "a live lease is not taken back")
	hs, err := p.Holders(ctx, "a")
	require.NoError(t, err)
	require.Len(t, hs, 1)
	require.Equal(t, Holder{Job: "job", Permit: g.Permit, Token: g.Token, Expires: hs[0].Expires}, hs[0])
	require.False(t, hs[0].Expires.IsZero())
	renewed, err := p.Renew(ctx, "a", "job")
	require.NoError(t, err)
	require.False(t, renewed.Before(g.Expires))
	hs2, err := p.Holders(ctx, "a")
	require.NoError(t, err)
	require.False(t, hs2[0].Expires.Before(hs[0].Expires))
	again, err := p.Acquire(ctx, "a", "job")
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.False(t, again.Expires.IsZero())

	require.ErrorIs(t, p.Release(ctx, "b", "job"), ErrNotHeld, "the wrong owner")
	require.ErrorIs(t, p.Release(ctx, "a", "nobody"), ErrNotHeld)
	_, err = p.Renew(ctx, "a", "nobody")
	require.ErrorIs(t, err, ErrNotHeld)
	require.NoError(t, p.Release(ctx, "a", "job"))
	hs, err = p.Holders(ctx, "a")
	require.NoError(t, err)
	require.Empty(t, hs)
	requireClean(t, p)

	_, err = NewPool(p.c, PoolOptions{Name: "x", Capacity: 2, Owners: owners(2, "a"), Lease: -time.Second})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "PoolOptions.Lease")
	noLease := newTestPool(t, p.c, PoolOptions{Capacity: 2, Owners: owners(2, "a")})
	_, err = noLease.Renew(ctx, "a", "job")
	require.ErrorIs(t, err, ErrInvalid)
}
