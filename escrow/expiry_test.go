package escrow

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// leasedKinds builds a Central or a one-owner Pool of capacity permits with the lease,
// the skew margin and the holders' clock of opts, over c.
var leasedKinds = map[string]func(t *testing.T, c Client, capacity int, lease, skew time.Duration, clock func() time.Time) leasedLimiter{
	"central": func(t *testing.T, c Client, capacity int, lease, skew time.Duration, clock func() time.Time) leasedLimiter {
		cl, err := NewCentral(c, CentralOptions{Name: "limit", Capacity: capacity, Prefix: celebritytest.NewPrefix(t),
			AllowWeakDurability: true, Lease: lease, LeaseSkew: skew, Clock: clock})
		require.NoError(t, err)
		require.NoError(t, cl.Init(testkit.Ctx(t)))
		return centralLimiter{cl}
	},
	"pool": func(t *testing.T, c Client, capacity int, lease, skew time.Duration, clock func() time.Time) leasedLimiter {
		return poolLimiter{newTestPool(t, c, PoolOptions{Capacity: capacity, Owners: owners(capacity, "a"),
			Lease: lease, LeaseSkew: skew, Clock: clock})}
	},
}

// TestReplayedGrantNeverOutlivesTheLedgersLease: a holder whose clock is off from the ledger
// server's (±60 s, ±2×LeaseSkew) acquires with a lease, and the same job is acquired again,
// by the caller's own retry or by go-redis after a lost reply. The replayed grant's Expires,
// by the holder's clock, must not be later than the instant at which the ledger's lease ends
// (the holder would keep working on a permit the ledger gives to another job), nor earlier
// than that instant less the replay's round trip (the holder would drop a live permit). Then
// the lease runs out, another job gets the permit, and the occupancy check must find the
// first holder stopped. Before the fix, a replay reported the server's expiry less the skew
// as a holder-clock instant: 59.8 s too late with the holder 60 s behind.
func TestReplayedGrantNeverOutlivesTheLedgersLease(t *testing.T) {
	celebritytest.Long(t)
	const lease, skew = 150 * time.Millisecond, 100 * time.Millisecond
	for _, kind := range []string{"central", "pool"} {
		for _, replay := range []string{"caller", "go-redis"} {
			for _, cfg := range []struct {
				off         time.Duration
				lease, skew time.Duration
			}{
				{-60 * time.Second, lease, skew}, {60 * time.Second, lease, skew},
				{-2 * skew, lease, skew}, {2 * skew, lease, skew},
				{0, skew / 2, skew}, // a lease shorter than the skew margin
			} {
				t.Run(fmt.Sprintf("%s/%s/offset=%s/lease=%s", kind, replay, cfg.off, cfg.lease), func(t *testing.T) {
					replayedGrantCase(t, kind, replay, cfg.off, cfg.lease, cfg.skew)
				})
			}
		}
	}
}

func replayedGrantCase(t *testing.T, kind, replay string, off, lease, skew time.Duration) {
	ctx := testkit.Ctx(t)
	inj := faults.New()
	c := faultyClient(t, celebritytest.Standalone(t).Client(t), inj, 0)
	clock := offsetClock(off)
	lim := leasedKinds[kind](t, c, 1, lease, skew, clock)
	occ := newOccupancy(t, lim, 1)

	first, err := lim.acquire(ctx, 0, "first")
	require.NoError(t, err)
	occ.hold("first", first, clock)
	occ.check(ctx, "grant")
	if replay == "go-redis" {
		require.NoError(t, lim.release(ctx, 0, "first"))
		occ.drop("first")
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: acquireScript.Hash()}, 1)
	}
	before := time.Now()
	g, err := lim.acquire(ctx, 0, "first")
	elapsed := time.Since(before)
	require.NoError(t, err)
	require.True(t, g.Replayed, "the second run finds the grant")
	if replay == "go-redis" {
		require.Equal(t, int64(1), inj.Dropped(), "the reply of the first run was lost and go-redis re-sent it")
	}
	occ.hold("first", g, clock)
	occ.check(ctx, "replay")

	// The instant the ledger's lease ends, by the holder's clock.
	end := leaseExpiry(t, c, lim.ledgerOf(0), "first").Add(off)
	assert.Falsef(t, g.Expires.After(end), "replayed Expires %s is %s after the ledger's lease ends", g.Expires, g.Expires.Sub(end))
	assert.Falsef(t, g.Expires.Before(end.Add(-elapsed-time.Millisecond)),
		"replayed Expires %s is %s before the ledger's lease ends (round trip %s)", g.Expires, end.Sub(g.Expires), elapsed)

	awaitServerTime(t, c, end.Add(-off).Add(skew))
	next, err := lim.acquire(ctx, 0, "next")
	require.NoError(t, err, "the lease and the margin have run out")
	require.Equal(t, g.Permit, next.Permit)
	require.Greater(t, next.Token, g.Token)
	occ.hold("next", next, clock)
	occ.check(ctx, "the permit granted again")
}

// TestLeaseIsWholeMillisecondsRoundedSafely: the ledger counts leases in whole milliseconds.
// A sub-millisecond Lease or LeaseSkew is refused (before the fix it was accepted and
// truncated in the script while Expires used the full value), and a grant's or a renewal's
// Expires by the holder's clock is never later than the ledger's expiry: the script rounds
// its clock up when it sets an expiry (before the fix it rounded down, and a holder whose
// request reached the server within the same millisecond got up to 1 ms too much).
func TestLeaseIsWholeMillisecondsRoundedSafely(t *testing.T) {
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	for _, bad := range []struct {
		lease, skew time.Duration
		field       string
	}{
		{1500 * time.Microsecond, 0, "Lease"}, {time.Nanosecond, 0, "Lease"}, {time.Second + time.Microsecond, 0, "Lease"},
		{time.Second, 1500 * time.Microsecond, "LeaseSkew"},
	} {
		_, err := NewPool(c, PoolOptions{Name: "p", Capacity: 1, Owners: owners(1, "a"), Lease: bad.lease, LeaseSkew: bad.skew})
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, "PoolOptions."+bad.field+" must be a whole number of milliseconds")
		_, err = NewCentral(c, CentralOptions{Name: "l", Capacity: 1, Lease: bad.lease, LeaseSkew: bad.skew})
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, "CentralOptions."+bad.field+" must be a whole number of milliseconds")
	}

	const n = 40
	for _, kind := range []string{"central", "pool"} {
		lim := leasedKinds[kind](t, c, n, time.Minute, 0, time.Now)
		occ := newOccupancy(t, lim, n)
		for i := range n {
			job := fmt.Sprintf("job-%d", i)
			g, err := lim.acquire(ctx, 0, job)
			require.NoError(t, err)
			occ.hold(job, g, time.Now)
			end := leaseExpiry(t, c, lim.ledgerOf(0), job)
			require.Falsef(t, g.Expires.After(end), "%s: grant's Expires %s is %s after the ledger's", kind, g.Expires, g.Expires.Sub(end))
			exp, err := lim.renew(ctx, 0, job)
			require.NoError(t, err)
			occ.renewed(job, exp)
			end = leaseExpiry(t, c, lim.ledgerOf(0), job)
			require.Falsef(t, exp.After(end), "%s: renewal's expiry %s is %s after the ledger's", kind, exp, exp.Sub(end))
		}
		occ.check(ctx, kind)
	}
}

// TestRenewAfterTheLeaseLapsedIsRefused: a holder whose lease ended more than LeaseSkew ago
// renews. Its permit may be granted again at any moment, so the renewal is refused
// (ErrNotHeld) and the permit taken back, even where nobody took it yet. The case the issue
// found: job old's permit was taken back and granted to job new, the ledger was restored to a
// point before that (it forgot new's grant), and Reconcile brought it back; before the fix
// old's Renew then succeeded (renew.lua checked only that old was in the jobs hash), and old
// believed it held the permit new holds.
func TestRenewAfterTheLeaseLapsedIsRefused(t *testing.T) {
	const lease, skew = 100 * time.Millisecond, 50 * time.Millisecond
	for _, kind := range []string{"central", "pool"} {
		t.Run(kind+"/lapsed", func(t *testing.T) {
			ctx := testkit.Ctx(t)
			c := celebritytest.Standalone(t).Client(t)
			lim := leasedKinds[kind](t, c, 1, lease, skew, time.Now)
			occ := newOccupancy(t, lim, 1)
			g, err := lim.acquire(ctx, 0, "old")
			require.NoError(t, err)
			occ.hold("old", g, time.Now)
			awaitServerTime(t, c, leaseExpiry(t, c, lim.ledgerOf(0), "old").Add(skew))
			occ.check(ctx, "lapsed")
			_, err = lim.renew(ctx, 0, "old")
			require.ErrorIs(t, err, ErrNotHeld, "a lease that ended more than LeaseSkew ago is not renewed")
			a, err := lim.Audit(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, a.Free, "the refused renewal took the permit back")
			occ.check(ctx, "refused")
		})
	}
	t.Run("pool/restored-and-reconciled", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		c := celebritytest.Standalone(t).Client(t)
		lim := leasedKinds["pool"](t, c, 1, lease, skew, time.Now).(poolLimiter)
		occ := newOccupancy(t, lim, 1)
		old, err := lim.acquire(ctx, 0, "old")
		require.NoError(t, err)
		occ.hold("old", old, time.Now)
		backup := copyLedger(t, c, lim.ledgerOf(0))
		awaitServerTime(t, c, leaseExpiry(t, c, lim.ledgerOf(0), "old").Add(skew))
		next, err := lim.acquire(ctx, 0, "new")
		require.NoError(t, err, "old's lease and the margin have run out")
		require.Equal(t, old.Permit, next.Permit)
		occ.check(ctx, "granted again")

		backup.restore(t, c, lim.ledgerOf(0)) // the ledger forgets new's grant
		_, err = lim.acquire(ctx, 0, "probe")
		require.ErrorIs(t, err, ErrFenced)
		require.NoError(t, lim.Reconcile(ctx, "a"))
		hs, err := lim.Holders(ctx, "a")
		require.NoError(t, err)
		require.Len(t, hs, 1)
		require.Equal(t, "old", hs[0].Job, "the restored ledger shows old's grant again")

		exp, err := lim.renew(ctx, 0, "old")
		require.ErrorIsf(t, err, ErrNotHeld, "old was told it holds permit %d until %v; new holds it with token %d > %d",
			old.Permit, exp, next.Token, old.Token)
		occ.drop("old")
		occ.check(ctx, "renewal refused")
		again, err := lim.acquire(ctx, 0, "after")
		require.NoError(t, err, "the refused renewal took the permit back")
		require.Greater(t, again.Token, next.Token, "above every token the restored ledger forgot")
	})
}
