package routing

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// Provision creates the ownership records of the installed table on the shards it assigns
// them to, open at the table's generation, and returns how many it created.
//
// It is for bootstrapping a table and for placing units that were never owned anywhere (a
// new override or spread before any data was written for it). It never moves a unit: if a
// unit's record exists on another shard in any state, or on its assigned shard in a state
// other than open, Provision creates nothing and returns an error wrapping
// ErrOwnershipChanged; moving a unit that has an owner is a migration. It is idempotent:
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
	claims := make(map[string][]Unit)
	for j, p := range units {
		for i, name := range names {
			o := found[i][j]
			switch {
			case name != p.Shard && o.State != StateNone:
				return 0, fmt.Errorf("%w: %s is assigned to shard %q but has a record on shard %q (%v); moving it is a migration",
					ErrOwnershipChanged, p.Unit, p.Shard, name, o)
			case name == p.Shard && o.State == StateNone:
				claims[name] = append(claims[name], p.Unit)
			case name == p.Shard && o.State != StateOpen:
				return 0, fmt.Errorf("%w: %s on shard %q is %v, not provisionable", ErrOwnershipChanged, p.Unit, p.Shard, o)
			}
		}
	}
	var created atomic.Int64
	g, gctx = errgroup.WithContext(ctx)
	for name, us := range claims {
		g.Go(func() error {
			for _, u := range us {
				_, err := r.shards[name].Transition(gctx, u, Ownership{}, Ownership{Generation: c.gen, State: StateOpen})
				if err != nil {
					return err
				}
				created.Add(1)
			}
			return nil
		})
	}
	err := g.Wait()
	return int(created.Load()), err
}
