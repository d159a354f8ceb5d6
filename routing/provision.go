package routing

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
)

// Provision creates the ownership records of the installed table on the shards it assigns
// them to, open at the table's generation, and returns how many it created.
//
// It is for bootstrapping a table and for placing units that were never owned anywhere (a
// new override or spread before any data was written for it). It never moves a unit: if a
// unit is open or importing on another shard, or has a record on its assigned shard in a
// state other than open, Provision creates nothing and returns an error wrapping
// ErrOwnershipChanged; moving a unit that has an owner is a migration. Records left closed
// or cancelled on other shards by earlier migrations are history and do not stop it. A new
// override or spread unit is refused with ErrTenantHasData while the tenant still has
// records, tombstones or idempotency records in its hash bucket: opening an empty unit would
// hide them (reads would find nothing and a create-if-absent would succeed again); such a
// tenant is moved by a tenant migration. Before it opens a new override or spread unit, it
// marks the tenant as moved out of its hash bucket (see
// [Shard.MarkMoved]), so that a client still routing the tenant by an older table is
// refused there instead of writing where no one reads. It is idempotent:
// records already open on the assigned shard are left as they are. Provision reads every
// unit's record on every shard (shards in parallel); it is an administrative call, and
// concurrent Provision calls for different tables are not coordinated.
func (r *Router) Provision(ctx context.Context) (int, error) {
	c := r.cur.Load()
	if c == nil {
		return 0, ErrNoTable
	}
	units := c.table.Units()
	names := make([]string, 0, len(r.shards))
	for name := range r.shards {
		names = append(names, name)
	}
	slices.Sort(names)
	found, err := r.ownerships(ctx, names, units)
	if err != nil {
		return 0, err
	}
	plan, err := planProvision(c.table, names, units, found)
	if err != nil {
		return 0, err
	}
	return r.applyProvision(ctx, plan)
}

// ownerships reads every unit's ownership record on every shard (shards in parallel): the
// result is indexed by shard (in names' order), then unit.
func (r *Router) ownerships(ctx context.Context, names []string, units []Placement) ([][]Ownership, error) {
	found := make([][]Ownership, len(names))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			found[i] = make([]Ownership, len(units))
			for j, p := range units {
				o, _, err := r.shards[name].Ownership(gctx, p.Unit)
				if err != nil {
					return err
				}
				found[i][j] = o
			}
			return nil
		})
	}
	return found, g.Wait()
}

// provisionPlan is what Provision creates, by shard: the bucket units to open, the tenants
// to mark as moved out of their buckets (bucket units with Tenant set), and the override
// and spread units to open after that; bucketOwn is each marked bucket's record as the
// marks expect it.
type provisionPlan struct {
	gen       uint64
	buckets   map[string][]Unit
	marks     map[string][]Unit
	claims    map[string][]Unit
	bucketOwn map[uint32]Ownership
}

// planProvision decides, from the records found on every shard (found[shard][unit], shards
// in names' order), which units Provision opens where. It refuses, planning nothing, a unit
// that is open or importing on a shard the table does not assign it to (that is a
// migration), and one whose record on its own shard exists but is not open. It is pure.
func planProvision(t *Table, names []string, units []Placement, found [][]Ownership) (provisionPlan, error) {
	p := provisionPlan{gen: t.Generation, buckets: map[string][]Unit{}, marks: map[string][]Unit{},
		claims: map[string][]Unit{}, bucketOwn: map[uint32]Ownership{}}
	for j, pl := range units {
		for i, name := range names {
			if err := p.place(pl, name, found[i][j]); err != nil {
				return provisionPlan{}, err
			}
		}
	}
	marked := make(map[string]bool)
	for _, us := range p.claims {
		for _, u := range us {
			if marked[u.Tenant] {
				continue
			}
			marked[u.Tenant] = true
			b := BucketOf(u.Tenant, t.Buckets)
			owner := t.BucketOwner(b)
			p.marks[owner] = append(p.marks[owner], Unit{Kind: KindBucket, Bucket: b, Tenant: u.Tenant})
		}
	}
	return p, nil
}

// place plans one unit against the record o that shard name holds for it.
func (p *provisionPlan) place(pl Placement, name string, o Ownership) error {
	switch {
	case name != pl.Shard && (o.State == StateOpen || o.State == StateImporting):
		// Closed and cancelled records elsewhere are history a migration leaves (and
		// must keep); only an owner or an import in progress makes placing it here a move.
		return fmt.Errorf("%w: %s is assigned to shard %q but is %v on shard %q; moving it is a migration",
			ErrOwnershipChanged, pl.Unit, pl.Shard, o, name)
	case name != pl.Shard:
	case o.State == StateNone && pl.Unit.Kind == KindBucket:
		p.buckets[name] = append(p.buckets[name], pl.Unit)
		p.bucketOwn[pl.Unit.Bucket] = Ownership{Generation: p.gen, State: StateOpen}
	case o.State == StateNone:
		p.claims[name] = append(p.claims[name], pl.Unit)
	case o.State != StateOpen:
		return fmt.Errorf("%w: %s on shard %q is %v, not provisionable", ErrOwnershipChanged, pl.Unit, pl.Shard, o)
	case pl.Unit.Kind == KindBucket:
		p.bucketOwn[pl.Unit.Bucket] = o
	}
	return nil
}

// applyProvision carries plan out in its order: open the buckets; check that no tenant to
// mark has data in its bucket; mark the tenants moved out; open their override and spread
// units. It returns how many units it opened.
func (r *Router) applyProvision(ctx context.Context, plan provisionPlan) (int, error) {
	var created atomic.Int64
	open := Ownership{Generation: plan.gen, State: StateOpen}
	create := func(ctx context.Context, s *Shard, u Unit) error {
		_, err := s.Transition(ctx, u, Ownership{}, open)
		if err == nil {
			created.Add(1)
		}
		return err
	}
	if err := r.perShard(ctx, plan.buckets, create); err != nil {
		return int(created.Load()), err
	}
	if err := r.perShard(ctx, plan.marks, func(ctx context.Context, s *Shard, m Unit) error {
		return s.noTenantData(ctx, BucketUnit(m.Bucket), m.Tenant)
	}); err != nil {
		return int(created.Load()), err
	}
	if err := r.perShard(ctx, plan.marks, func(ctx context.Context, s *Shard, m Unit) error {
		o := plan.bucketOwn[m.Bucket]
		_, err := s.MarkMoved(ctx, BucketUnit(m.Bucket), m.Tenant, true, o, o)
		return err
	}); err != nil {
		return int(created.Load()), err
	}
	err := r.perShard(ctx, plan.claims, create)
	return int(created.Load()), err
}

// perShard calls fn for every unit of every shard in work: shards in parallel, units in order.
func (r *Router) perShard(ctx context.Context, work map[string][]Unit, fn func(context.Context, *Shard, Unit) error) error {
	g, gctx := errgroup.WithContext(ctx)
	for name, us := range work {
		g.Go(func() error {
			for _, u := range us {
				if err := fn(gctx, r.shards[name], u); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// noTenantData returns an error wrapping ErrTenantHasData if bucket unit u on this shard
// holds any record, tombstone or idempotency record of tenant. It pages through the bucket
// one HSCAN page per script call.
func (s *Shard) noTenantData(ctx context.Context, u Unit, tenant string) error {
	k := s.keys.unit(u)
	prefix := routingfmt.RecordField(tenant, "")
	for _, phase := range []string{"rec", "ops"} {
		cursor := "0"
		for {
			reply, err := tenantscanScript.Run(ctx, s.client, []string{k.Records, k.Ops}, phase, cursor, prefix, 500).StringSlice()
			if err != nil {
				return fmt.Errorf("routing: look for data of tenant %q in %s on shard %q: %w", tenant, u, s.name, err)
			}
			if len(reply) != 2 {
				return fmt.Errorf("routing: look for data of tenant %q: malformed reply %q", tenant, reply)
			}
			if reply[1] != "" {
				return fmt.Errorf("%w: tenant %q has data in %s on shard %q (%s %q); giving it a unit of its own "+
					"would hide that data: move the tenant out of its bucket with a tenant migration (package migrate) instead",
					ErrTenantHasData, tenant, u, s.name, map[string]string{"rec": "record", "ops": "op record"}[phase], reply[1])
			}
			if cursor = reply[0]; cursor == "0" {
				break
			}
		}
	}
	return nil
}
