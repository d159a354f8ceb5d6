package migrate

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"strconv"
	"time"
)

// Status returns a cache-mode move's status; RollbackSafe is computed against the clock.
func (c *Cache) Status(ctx context.Context, id string) (CacheStatus, error) {
	m, err := bound.Do(ctx, func() (map[string]string, error) { return c.control.HGetAll(ctx, c.jkey(id)).Result() })
	if err != nil {
		return CacheStatus{}, fmt.Errorf("migrate: cache status: %w", err)
	}
	if len(m) == 0 || m["mode"] != "cache" {
		return CacheStatus{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	n := func(k string) int64 { v, _ := strconv.ParseInt(m[k], 10, 64); return v }
	s := CacheStatus{ID: id, Tenant: m["tenant"], Source: m["source"], Target: m["target"], State: State(m["state"]),
		Warmed: int(n("warmed")), Missing: int(n("missing")), FlipGen: uint64(n("flipgen")), BackGen: uint64(n("backgen")),
		hadOverride: m["hadoverride"] == "1"}
	if e := n("oldexp"); e > 0 {
		s.OldCopyExpires = time.UnixMilli(e)
	}
	if e := n("halfexp"); e > 0 {
		s.HalfExpired = time.UnixMilli(e)
	}
	if e := n("flipped"); e > 0 {
		s.Flipped = time.UnixMilli(e)
	}
	now := c.o.Clock()
	s.RollbackSafe = s.State == CacheFlipped && (s.HalfExpired.IsZero() || now.Before(s.HalfExpired)) &&
		now.Before(s.Flipped.Add(c.o.RollbackWindow))
	return s, nil
}

// Resume continues a cache move its caller left unfinished (a crash, a lost reply) and
// returns its status. A move that was warming ends Flipped if its flip was published (the
// table routes the tenant to the target; its warm-up figures are unknown then and rollback
// is not offered), and otherwise Aborted: the tenant stays on its source, the lock is
// freed, and it may be moved again (the keys warmed on the target are left to their TTLs;
// a later Move copies the hot keys again). A move that was rolling back completes the
// rollback. Any other state is returned as it is.
func (c *Cache) Resume(ctx context.Context, id string) (CacheStatus, error) {
	s, err := c.Status(ctx, id)
	if err != nil {
		return s, err
	}
	switch s.State {
	case CacheRollingBack:
		return c.Rollback(ctx, id)
	case CacheWarming:
	default:
		return s, nil
	}
	epoch, err := c.take(ctx, id, s.Tenant, CacheWarming)
	if err != nil {
		return s, err
	}
	defer c.release(ctx, id, epoch)
	t, err := c.store.Load(ctx)
	if err != nil {
		return s, fmt.Errorf("migrate: cache resume: %w", err)
	}
	// The tenant is locked by this move, so only its flip routes the tenant to the target.
	if t.Overrides[s.Tenant] == s.Target {
		err = c.step(ctx, id, s.Tenant, epoch, CacheWarming, CacheFlipped, false, "flipgen", u64(t.Generation),
			"flipped", ms(c.o.Clock()), "halfexp", ms(c.o.Clock()))
	} else {
		err = c.step(ctx, id, s.Tenant, epoch, CacheWarming, Aborted, true, "reason", "resumed while warming")
	}
	if err != nil {
		return s, err
	}
	return c.Status(ctx, id)
}

// Rollback flips the tenant back to its source in a new generation, while RollbackSafe
// holds; after that it returns ErrRollbackUnsafe and changes nothing (the source is cold or
// stale; move the tenant again instead). The source serves its old copy after a rollback:
// a key written on the target while the move was flipped is served with its value from
// before the flip until that copy expires or is overwritten. RollbackWindow bounds how old
// those values can be.
func (c *Cache) Rollback(ctx context.Context, id string) (CacheStatus, error) {
	s, err := c.Status(ctx, id)
	if err != nil {
		return s, err
	}
	if s.State == CacheRolledBack {
		return s, nil
	}
	if s.State != CacheFlipped && s.State != CacheRollingBack {
		return s, invalidf("cache move %q is %s; only a Flipped move rolls back", id, s.State)
	}
	if s.State == CacheFlipped && !s.RollbackSafe {
		return s, fmt.Errorf("%w: move %q, old copy expired at %v", ErrRollbackUnsafe, id, s.OldCopyExpires)
	}
	// The record moves to RollingBack with the new epoch in one step: a Finish (or another
	// Rollback) from then on cannot end the move as flipped while the flip back is published.
	epoch, err := c.take(ctx, id, s.Tenant, s.State, string(CacheRollingBack))
	var se *stateError
	if errors.As(err, &se) && s.State == CacheFlipped {
		epoch, err = c.take(ctx, id, s.Tenant, CacheRollingBack)
	}
	if err != nil {
		return s, err
	}
	defer c.release(ctx, id, epoch)
	gen, err := c.publish(ctx, id, epoch, CacheRollingBack, s.Tenant, s.Source, !s.hadOverride)
	if err != nil {
		return s, err
	}
	if err := c.step(ctx, id, s.Tenant, epoch, CacheRollingBack, CacheRolledBack, true, "backgen", u64(gen)); err != nil {
		return s, err
	}
	return c.Status(ctx, id)
}

// Finish ends a Flipped move (rollback is no longer offered) and frees the tenant for
// another move.
func (c *Cache) Finish(ctx context.Context, id string) (CacheStatus, error) {
	s, err := c.Status(ctx, id)
	if err != nil {
		return s, err
	}
	if s.State == CacheDone {
		return s, nil
	}
	epoch, err := c.take(ctx, id, s.Tenant, CacheFlipped)
	if err != nil {
		return s, err
	}
	defer c.release(ctx, id, epoch)
	if err := c.step(ctx, id, s.Tenant, epoch, CacheFlipped, CacheDone, true); err != nil {
		return s, err
	}
	return c.Status(ctx, id)
}
