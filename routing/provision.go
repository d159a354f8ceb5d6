package routing

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/celebrity-go/celebrity/internal/hashing"
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
	found := make([][]Ownership, len(names)) // by shard, then unit
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
	if err := g.Wait(); err != nil {
		return 0, err
	}
	buckets := make(map[string][]Unit) // bucket units to create, by shard
	claims := make(map[string][]Unit)  // override and spread units to create, by shard
	bucketOwn := make(map[uint32]Ownership)
	for j, p := range units {
		for i, name := range names {
			o := found[i][j]
			switch {
			case name != p.Shard && (o.State == StateOpen || o.State == StateImporting):
				// Closed and cancelled records elsewhere are history a migration leaves (and
				// must keep); only an owner or an import in progress makes placing it here a move.
				return 0, fmt.Errorf("%w: %s is assigned to shard %q but is %v on shard %q; moving it is a migration",
					ErrOwnershipChanged, p.Unit, p.Shard, o, name)
			case name == p.Shard && o.State == StateNone && p.Unit.Kind == KindBucket:
				buckets[name] = append(buckets[name], p.Unit)
				bucketOwn[p.Unit.Bucket] = Ownership{Generation: c.gen, State: StateOpen}
			case name == p.Shard && o.State == StateNone:
				claims[name] = append(claims[name], p.Unit)
			case name == p.Shard && o.State != StateOpen:
				return 0, fmt.Errorf("%w: %s on shard %q is %v, not provisionable", ErrOwnershipChanged, p.Unit, p.Shard, o)
			case name == p.Shard && p.Unit.Kind == KindBucket:
				bucketOwn[p.Unit.Bucket] = o
			}
		}
	}
	var created atomic.Int64
	open := Ownership{Generation: c.gen, State: StateOpen}
	if err := r.perShard(ctx, buckets, func(ctx context.Context, s *Shard, u Unit) error {
		_, err := s.Transition(ctx, u, Ownership{}, open)
		if err == nil {
			created.Add(1)
		}
		return err
	}); err != nil {
		return int(created.Load()), err
	}
	marks := make(map[string][]Unit) // by bucket shard: buckets, each with Tenant set to the tenant to mark
	marked := make(map[string]bool)
	for _, us := range claims {
		for _, u := range us {
			if marked[u.Tenant] {
				continue
			}
			marked[u.Tenant] = true
			b := uint32(hashing.Bucket(u.Tenant, c.buckets))
			marks[c.table.BucketOwner(b)] = append(marks[c.table.BucketOwner(b)], Unit{Kind: KindBucket, Bucket: b, Tenant: u.Tenant})
		}
	}
	if err := r.perShard(ctx, marks, func(ctx context.Context, s *Shard, m Unit) error {
		return s.noTenantData(ctx, BucketUnit(m.Bucket), m.Tenant)
	}); err != nil {
		return int(created.Load()), err
	}
	if err := r.perShard(ctx, marks, func(ctx context.Context, s *Shard, m Unit) error {
		o := bucketOwn[m.Bucket]
		_, err := s.MarkMoved(ctx, BucketUnit(m.Bucket), m.Tenant, true, o, o)
		return err
	}); err != nil {
		return int(created.Load()), err
	}
	err := r.perShard(ctx, claims, func(ctx context.Context, s *Shard, u Unit) error {
		_, err := s.Transition(ctx, u, Ownership{}, open)
		if err == nil {
			created.Add(1)
		}
		return err
	})
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
	k := s.keys.Unit(u)
	prefix := RecordField(tenant, "")
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
