package escrow

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/testkit"
)

// The lease tests drive the limiters of concurrent_test.go (centralLimiter, poolLimiter) with
// a few more calls: the ledger view of who holds what, renewals, and the ledger of a worker.

func (c centralLimiter) renew(ctx context.Context, _ int, job string) (time.Time, error) {
	return c.Renew(ctx, job)
}
func (p poolLimiter) renew(ctx context.Context, w int, job string) (time.Time, error) {
	return p.Renew(ctx, p.owner(w), job)
}
func (c centralLimiter) ledgerOf(int) ledger { return c.l }
func (p poolLimiter) ledgerOf(w int) ledger  { return p.ledgers[p.owner(w)] }

// heldBy reads every ledger atomically (one after the other) and returns which job holds
// each permit.
func (c centralLimiter) heldBy(ctx context.Context) (map[int]string, error) {
	s, err := c.l.snapshot(ctx, c.c)
	return s.held, err
}
func (p poolLimiter) heldBy(ctx context.Context) (map[int]string, error) {
	snaps, err := p.ledgerSnapshots(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, s := range snaps {
		for permit, job := range s.held {
			out[permit] = job
		}
	}
	return out, nil
}

// leasedLimiter is a Central or a Pool as the lease tests use them.
type leasedLimiter interface {
	limiter
	renew(ctx context.Context, worker int, job string) (time.Time, error)
	heldBy(ctx context.Context) (map[int]string, error)
	ledgerOf(worker int) ledger
}

// occupancy is the check every lease test runs after each step: never more permits held
// than capacity, sampled from Redis (an audit, and the ledgers' holders) and from the
// holders' view. A holder believes it holds its permit from the grant until it releases it
// or until Grant.Expires (or the expiry Renew returned) by its own clock. At each sample,
// no permit may be believed held by two jobs, no more than capacity permits may be believed
// held, and a permit a holder believes it holds must be held by that job in the ledger: the
// ledgers are read first and the holders' clocks after, so a belief still live then was live
// at the read.
type occupancy struct {
	t        testing.TB
	lim      leasedLimiter
	capacity int
	mu       sync.Mutex
	beliefs  map[string]belief
	samples  int
	maxHeld  int
}

type belief struct {
	permit  int
	expires time.Time // zero: no lease
	clock   func() time.Time
}

func newOccupancy(t testing.TB, lim leasedLimiter, capacity int) *occupancy {
	return &occupancy{t: t, lim: lim, capacity: capacity, beliefs: map[string]belief{}}
}

// hold records that job believes it holds g's permit until g.Expires by clock.
func (o *occupancy) hold(job string, g Grant, clock func() time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.beliefs[job] = belief{permit: g.Permit, expires: g.Expires, clock: clock}
}

// renewed records a renewal of job's lease until exp.
func (o *occupancy) renewed(job string, exp time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.beliefs[job]
	b.expires = exp
	o.beliefs[job] = b
}

// drop records that job stopped working on its permit (before it releases it).
func (o *occupancy) drop(job string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.beliefs, job)
}

// check samples both views after step and fails the test on any excess.
func (o *occupancy) check(ctx context.Context, step string) {
	o.t.Helper()
	rep, err := o.lim.Audit(ctx)
	require.NoError(o.t, err, step)
	require.Truef(o.t, rep.Clean(), "%s: audit %s", step, rep)
	require.LessOrEqualf(o.t, rep.Held, o.capacity, "%s: held in Redis", step)
	held, err := o.lim.heldBy(ctx)
	require.NoError(o.t, err, step)
	require.LessOrEqualf(o.t, len(held), o.capacity, "%s: held in Redis", step)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.samples++
	believed := map[int]string{}
	var errs []string
	for job, b := range o.beliefs {
		if !b.expires.IsZero() && !b.clock().Before(b.expires) {
			continue // the holder has stopped by its Expires
		}
		if other, ok := believed[b.permit]; ok {
			errs = append(errs, fmt.Sprintf("permit %d believed held by %s and %s", b.permit, job, other))
		}
		believed[b.permit] = job
		if held[b.permit] != job {
			errs = append(errs, fmt.Sprintf("%s believes it holds permit %d (until %s, %s left by its clock), the ledger says %q",
				job, b.permit, b.expires.Format(time.RFC3339Nano), b.expires.Sub(b.clock()), held[b.permit]))
		}
	}
	o.maxHeld = max(o.maxHeld, len(believed))
	if len(believed) > o.capacity {
		errs = append(errs, fmt.Sprintf("%d permits believed held, capacity %d", len(believed), o.capacity))
	}
	require.Emptyf(o.t, errs, "%s: the holders' view", step)
}

// offsetClock is a holder's clock offset from the servers' (the test's machine's) by off.
func offsetClock(off time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(off) }
}

// leaseExpiry reads job's lease expiry from the ledger (server milliseconds).
func leaseExpiry(t testing.TB, c Client, l ledger, job string) time.Time {
	t.Helper()
	ms, err := c.(redis.Cmdable).ZScore(testkit.Ctx(t), l.keys[7], job).Result()
	require.NoError(t, err, "job %q has a lease", job)
	return time.UnixMilli(int64(ms))
}

// awaitServerTime waits until the clock of c's server (every server of the kit runs on this
// machine's clock) has passed at: the event a lease test waits for, never a fixed sleep.
func awaitServerTime(t testing.TB, c Client, at time.Time) {
	t.Helper()
	ctx := testkit.Ctx(t)
	for {
		now, err := c.Time(ctx).Result()
		require.NoError(t, err)
		if now.After(at) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the server's clock did not pass %s", at)
		case <-time.After(min(at.Sub(now)+time.Millisecond, 50*time.Millisecond)):
		}
	}
}
