package routing

import (
	"context"
	"errors"
	"fmt"
)

// Do applies op to tenant's record op.Key under operation ID opID on the shard that owns it.
//
// It routes by the installed table and runs the guarded write there (see [Shard.Exec]). If
// the shard refuses with ErrStaleRoute, Do waits for a table newer than the one it used (and
// at least as new as the shard's ownership record), then retries on the new owner with the
// same opID and no backoff, at most Options.MaxRedirects times, within ctx. A stale table is
// never used as a fallback: if no newer table arrives in time (for example because the
// control Redis is unreachable), Do fails with an error that wraps both ErrStaleRoute and
// ctx.Err(). If the unit moved after an attempt whose reply was lost, the retry finds that
// attempt's result on the new owner (the op records travel with the unit) and returns it
// with Result.Replayed set.
//
// Other errors are returned as they are: ErrConflict, a [*VersionMismatchError], an
// ErrInvalid error, or a Redis error after which the outcome is unknown and the caller
// should retry with the same opID.
func (r *Router) Do(ctx context.Context, tenant, opID string, op Op) (Result, error) {
	if err := checkTenant(tenant); err != nil {
		return Result{}, err
	}
	if opID == "" {
		return Result{}, errInput("empty operation ID")
	}
	if err := op.validate(); err != nil {
		return Result{}, err
	}
	var res Result
	err := r.guarded(ctx, tenant, op.Key, func(rt Route) error {
		var err error
		res, err = rt.Shard.Exec(ctx, rt.Unit, rt.Generation, tenant, opID, op)
		return err
	})
	return res, err
}

// Get reads tenant's record key from the shard that owns it, with the same stale-route
// handling as [Router.Do]. It returns the record and whether one exists; a tombstone is
// returned as a record with Deleted set.
func (r *Router) Get(ctx context.Context, tenant, key string) (Record, bool, error) {
	if err := checkTenant(tenant); err != nil {
		return Record{}, false, err
	}
	var (
		rec Record
		ok  bool
	)
	err := r.guarded(ctx, tenant, key, func(rt Route) error {
		var err error
		rec, ok, err = rt.Shard.Get(ctx, rt.Unit, rt.Generation, tenant, key)
		return err
	})
	return rec, ok, err
}

// guarded runs call on the current route and follows stale-route refusals.
func (r *Router) guarded(ctx context.Context, tenant, key string, call func(Route) error) error {
	if r.load != nil {
		r.load.count(tenant)
	}
	for redirects := 0; ; redirects++ {
		rt, err := r.Route(tenant, key)
		if errors.Is(err, ErrNoTable) {
			if _, err := r.Await(ctx, 1); err != nil {
				return fmt.Errorf("%w: %w", ErrNoTable, err)
			}
			rt, err = r.Route(tenant, key)
		}
		if err != nil {
			return err
		}
		err = call(rt)
		var stale *StaleRouteError
		if !errors.As(err, &stale) {
			return err
		}
		if redirects >= r.o.MaxRedirects {
			return fmt.Errorf("routing: gave up after %d redirects: %w", redirects, err)
		}
		r.stats.redirects.Add(1)
		want := max(rt.Generation+1, stale.Owner.Generation)
		if _, werr := r.Await(ctx, want); werr != nil {
			return fmt.Errorf("%w; waiting for a newer table: %w", err, werr)
		}
	}
}
