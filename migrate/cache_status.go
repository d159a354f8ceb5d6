package migrate

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Status returns a cache-mode move's status; RollbackSafe is computed against the clock.
func (c *Cache) Status(ctx context.Context, id string) (CacheStatus, error) {
	m, err := c.control.HGetAll(ctx, c.jkey(id)).Result()
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
	s.RollbackSafe = s.State == CacheFlipped && (s.OldCopyExpires.IsZero() || c.o.Now().Before(s.OldCopyExpires))
	return s, nil
}

// Rollback flips the tenant back to its source in a new generation, if the old copy is
// still alive; after it expired it returns ErrRollbackUnsafe and changes nothing (the
// source is cold; move the tenant again instead).
func (c *Cache) Rollback(ctx context.Context, id string) (CacheStatus, error) {
	s, err := c.Status(ctx, id)
	if err != nil {
		return s, err
	}
	if s.State == CacheRolledBack {
		return s, nil
	}
	if s.State != CacheFlipped {
		return s, errInput("cache move %q is %s; only a Flipped move rolls back", id, s.State)
	}
	if !s.RollbackSafe {
		return s, fmt.Errorf("%w: move %q, old copy expired at %v", ErrRollbackUnsafe, id, s.OldCopyExpires)
	}
	gen, err := c.publish(ctx, s.Tenant, s.Source, !s.hadOverride)
	if err != nil {
		return s, err
	}
	if err := c.step(ctx, id, s.Tenant, CacheFlipped, CacheRolledBack, true, "backgen", u64(gen)); err != nil {
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
	if err := c.step(ctx, id, s.Tenant, CacheFlipped, CacheDone, true); err != nil {
		return s, err
	}
	return c.Status(ctx, id)
}
