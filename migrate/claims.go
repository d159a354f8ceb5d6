package migrate

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/routingfmt"

	"github.com/celebrity-go/celebrity/routing"
)

// Claim is a unit's import claim on one shard: its ownership record is "importing" for a
// migration.
type Claim struct {
	Shard     string            // Shard names the shard holding the claim.
	Own       routing.Ownership // Own is the record (state "importing").
	Migration string            // Migration is the ID of the migration that claimed it.
	State     State             // State is that migration's state ("" if it has no journal record).
}

// Stuck reports whether no unfinished migration owns the claim any more: the claim refuses
// every read and write of the unit on that shard and blocks new imports there until
// [Coordinator.ClearClaim] removes it.
func (cl Claim) Stuck() bool { return cl.State == "" || cl.State.Terminal() }

// Claims returns unit u's import claims on every shard the Coordinator knows, with the state
// of the migration behind each: how an operator sees a stuck claim.
func (c *Coordinator) Claims(ctx context.Context, u routing.Unit) ([]Claim, error) {
	if err := u.Validate(); err != nil {
		return nil, invalidf("unit: %v", err)
	}
	var out []Claim
	for _, name := range sortedNames(c.shards) {
		sh := c.shards[name]
		v, err := bound.Do(ctx, func() ([]any, error) {
			return sh.c.HMGet(ctx, routingfmt.Keys(c.keys.Tag(u)).Own, "gen", "state", "mig").Result()
		})
		if err != nil {
			return nil, fmt.Errorf("migrate: read claim of %s on %q: %w", u, name, err)
		}
		gen, _ := v[0].(string)
		state, _ := v[1].(string)
		mig, _ := v[2].(string)
		if routing.State(state) != routing.StateImporting {
			continue
		}
		cl := Claim{Shard: name, Migration: mig}
		cl.Own.State = routing.StateImporting
		_, _ = fmt.Sscan(gen, &cl.Own.Generation)
		if s, err := c.load(ctx, mig); err == nil {
			cl.State = s.State
		} else if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalid) {
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

// ClearClaim removes unit u's import claim on shard when the migration that made it is
// finished (or has no journal record): the claim's data is deleted and its record left
// "cancelled", with a new fencing epoch for the unit, so no driver of that migration can
// act there again. It refuses with ErrBusy while that migration is unfinished (Cancel or
// Resume it instead), and with ErrInvalid when there is no claim. It never touches a
// record that is open, closed or claimed by another migration meanwhile (compare-and-set in
// one script). It is idempotent: clearing a cleared claim fails with ErrInvalid and
// changes nothing.
func (c *Coordinator) ClearClaim(ctx context.Context, u routing.Unit, shard string) (Claim, error) {
	if c.shards[shard] == nil {
		return Claim{}, invalidf("unknown shard %q", shard)
	}
	claims, err := c.Claims(ctx, u)
	if err != nil {
		return Claim{}, err
	}
	var cl *Claim
	for i := range claims {
		if claims[i].Shard == shard {
			cl = &claims[i]
		}
	}
	switch {
	case cl == nil:
		return Claim{}, invalidf("%s has no import claim on shard %q", u, shard)
	case !cl.Stuck():
		return *cl, fmt.Errorf("%w: the claim of %s on %q belongs to unfinished migration %q (%s); Cancel or Resume it",
			ErrBusy, u, shard, cl.Migration, cl.State)
	}
	reply, err := epochScript.Run(ctx, c.control, []string{c.epochKey(u)}).StringSlice()
	if err != nil || len(reply) != 2 {
		return *cl, fmt.Errorf("migrate: new epoch for %s: %v %w", u, reply, err)
	}
	var epoch uint64
	_, _ = fmt.Sscan(reply[1], &epoch)
	r := &run{Status: Status{ID: cl.Migration, Unit: u, Target: shard, ImportGen: cl.Own.Generation}, epoch: epoch}
	if err := c.prepare(ctx, r, "clear"); err != nil {
		return *cl, err
	}
	return *cl, nil
}

func sortedNames(m map[string]*shard) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
