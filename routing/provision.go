package routing

import (
	"context"
	"fmt"
)

// Provision creates the ownership records of the installed table on the shards it assigns
// them to, open at the table's generation, and returns how many it created.
//
// It is for bootstrapping a table and for placing units that were never owned anywhere (a
// new override or spread before any data was written for it). It never moves a unit: if a
// unit's record exists on another shard in any state, or on its assigned shard in a state
// other than open, Provision stops with an error wrapping ErrOwnershipChanged; moving a unit
// that has an owner is a migration. It is idempotent: records already open on the assigned
// shard are left as they are. Provision is an administrative call; concurrent Provision
// calls for different tables are not coordinated.
func (r *Router) Provision(ctx context.Context) (int, error) {
	c := r.cur.Load()
	if c == nil {
		return 0, ErrNoTable
	}
	created := 0
	for _, p := range c.table.Units() {
		target := r.shards[p.Shard]
		var mine Ownership
		for name, s := range r.shards {
			o, _, err := s.Ownership(ctx, p.Unit)
			if err != nil {
				return created, err
			}
			if name == p.Shard {
				mine = o
				continue
			}
			if o.State != StateNone {
				return created, fmt.Errorf("%w: %s is assigned to shard %q but has a record on shard %q (%v); moving it is a migration",
					ErrOwnershipChanged, p.Unit, p.Shard, name, o)
			}
		}
		switch mine.State {
		case StateOpen:
			continue
		case StateNone:
		default:
			return created, fmt.Errorf("%w: %s on shard %q is %v, not provisionable", ErrOwnershipChanged, p.Unit, p.Shard, mine)
		}
		if _, err := target.Transition(ctx, p.Unit, Ownership{}, Ownership{Generation: c.gen, State: StateOpen}); err != nil {
			return created, err
		}
		created++
	}
	return created, nil
}
