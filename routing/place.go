package routing

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// newPlacements returns the tenants that next places by an override or a spread while cur
// routes them by their hash bucket, sorted; none when cur is nil (a first table: no tenant
// can have written anything yet). It is pure.
func newPlacements(cur, next *Table) []string {
	if cur == nil {
		return nil
	}
	var out []string
	placed := func(t *Table, tenant string) bool {
		_, spread := t.Spreads[tenant]
		return t.Overrides[tenant] != "" || spread
	}
	for tenant := range next.Overrides {
		if !placed(cur, tenant) {
			out = append(out, tenant)
		}
	}
	for tenant := range next.Spreads {
		if !placed(cur, tenant) && next.Overrides[tenant] == "" {
			out = append(out, tenant)
		}
	}
	slices.Sort(out)
	return out
}

// markedTenant is one tenant a publication marked as moved out of its bucket, to undo if
// the publication does not happen.
type markedTenant struct {
	shard  *Shard
	bucket Unit
	tenant string
	own    Ownership
}

// guardPlacements makes it safe to publish next over cur for a store that knows the shards:
// for every tenant next newly places (see newPlacements), it marks the tenant as moved out
// of its bucket on the bucket's current shard (from here a client on an older table is
// refused there, so nothing new of the tenant can land in the bucket), then looks for the
// tenant's records, tombstones and idempotency records in the bucket. A tenant with data
// there is refused with ErrTenantHasData (a new unit would hide it: that is a tenant
// migration), and every mark this call set is cleared again. A tenant already marked (a
// carve-out's, or this publication's retried after a lost reply) is only checked for
// nothing. It returns the marks it set, for undoMarks when the publication fails.
func (s *Store) guardPlacements(ctx context.Context, cur, next *Table) ([]markedTenant, error) {
	var marks []markedTenant
	for _, tenant := range newPlacements(cur, next) {
		m, err := s.markForPlacement(ctx, cur, tenant)
		if m != nil {
			marks = append(marks, *m)
		}
		if err != nil {
			s.undoMarks(ctx, marks)
			return nil, err
		}
	}
	return marks, nil
}

// markForPlacement marks tenant as moved out of its bucket (unless it is already) and
// checks that the bucket holds nothing of it; it returns the mark it set, if any.
func (s *Store) markForPlacement(ctx context.Context, cur *Table, tenant string) (*markedTenant, error) {
	b := BucketOf(tenant, cur.Buckets)
	owner := cur.BucketOwner(b)
	sh := s.shards[owner]
	if sh == nil {
		return nil, fmt.Errorf("%w: cannot check that tenant %q has no data in bucket %d: no client for its shard %q",
			ErrInvalid, tenant, b, owner)
	}
	u := BucketUnit(b)
	own, moved, err := sh.Ownership(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("routing: place tenant %q: %w", tenant, err)
	}
	var m *markedTenant
	if _, ok := moved[tenant]; !ok && own.State != "" {
		// (A bucket with no record here was never opened: nothing was written in it.)
		if own.State != StateOpen {
			return nil, fmt.Errorf("%w: tenant %q: bucket %d on shard %q is %v, not open; place the tenant once its bucket is settled",
				ErrOwnershipChanged, tenant, b, owner, own)
		}
		if _, err := sh.MarkMoved(ctx, u, tenant, true, own, own); err != nil {
			return nil, fmt.Errorf("routing: place tenant %q: %w", tenant, err)
		}
		m = &markedTenant{shard: sh, bucket: u, tenant: tenant, own: own}
	}
	return m, sh.noTenantData(ctx, u, tenant)
}

// undoMarks clears the marks a publication set (best effort, by compare-and-set on the
// bucket's record as it was marked: a bucket that moved on meanwhile keeps its mark).
func (s *Store) undoMarks(ctx context.Context, marks []markedTenant) {
	ctx = context.WithoutCancel(ctx)
	for _, m := range marks {
		_, _ = m.shard.MarkMoved(ctx, m.bucket, m.tenant, false, m.own, m.own)
	}
}

// droppedPlacements returns the tenants cur places by an override or a spread that next
// routes by their hash bucket again, sorted. It is pure.
func droppedPlacements(cur, next *Table) []string {
	if cur == nil {
		return nil
	}
	return newPlacements(next, cur)
}

// unmarkUnopened clears, after next was published over cur, the bucket mark of every tenant
// next no longer places whose units under cur were never opened (no ownership record on
// their shards: the placement was published and reverted before Provision), so that the
// tenant writes in its bucket again. A tenant whose unit has a record is left marked: it
// returns to its bucket by a fold-back (package migrate). Best effort: a failure leaves the
// mark, which a later publication retries.
func (s *Store) unmarkUnopened(ctx context.Context, cur, next *Table) {
	ctx = context.WithoutCancel(ctx)
	for _, tenant := range droppedPlacements(cur, next) {
		opened := false
		for _, p := range cur.Units() {
			if p.Unit.Kind == KindBucket || p.Unit.Tenant != tenant {
				continue
			}
			sh := s.shards[p.Shard]
			if sh == nil {
				opened = true
				break
			}
			own, _, err := sh.Ownership(ctx, p.Unit)
			if err != nil || own.State != "" {
				opened = true
				break
			}
		}
		if opened {
			continue
		}
		b := BucketOf(tenant, next.Buckets)
		sh := s.shards[next.BucketOwner(b)]
		if sh == nil {
			continue
		}
		u := BucketUnit(b)
		if own, moved, err := sh.Ownership(ctx, u); err == nil && own.State == StateOpen {
			if _, ok := moved[tenant]; ok {
				_, _ = sh.MarkMoved(ctx, u, tenant, false, own, own)
			}
		}
	}
}

// unpublished reports whether err proves that a publication did not happen (a refusal made
// before or by the script), so that the marks it set can be cleared.
func unpublished(err error) bool {
	return errors.Is(err, ErrGenerationConflict) || errors.Is(err, ErrFenced) || errors.Is(err, ErrInvalid) ||
		errors.Is(err, ErrInvalidTable)
}
