package escrow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// RecoverReport lists what Recover did with each pending transfer.
type RecoverReport struct {
	// Completed and Aborted list the transfer IDs settled by this call.
	Completed, Aborted []string
	// Pending maps the transfer IDs that could not be settled to the reason (for example a
	// fenced target: its answer about T cannot be trusted until Reconcile).
	Pending map[string]error
}

// Recover finishes or aborts every transfer frozen at any source. For each one it asks the
// target by delivering T (idempotent): accepted means the source completes T; a durable
// refusal means the source aborts T. It never decides by elapsed time. Any process may run it,
// at any time, concurrently with transfers: every step is idempotent by transfer ID.
func (p *Pool) Recover(ctx context.Context) (RecoverReport, error) {
	rep := RecoverReport{Pending: map[string]error{}}
	for _, name := range p.order {
		snap, err := p.ledgers[name].snapshot(ctx, p.c)
		if err != nil {
			return rep, err
		}
		ids := make([]string, 0, len(snap.out))
		for id, rec := range snap.out {
			if rec.S == "frozen" {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		if len(ids) > 0 {
			// The freezes may not be witnessed yet (their process died before the raise).
			// Recover acts on them, so it witnesses them first: a source that loses them is
			// then fenced instead of granting permits the target has too.
			if err := p.raise(ctx, name, snap.seq); err != nil {
				return rep, err
			}
		}
		for _, id := range ids {
			rec := snap.out[id]
			f := Frozen{ID: id, From: name, To: rec.To, Permits: rec.P, Seq: rec.Seq, State: rec.S}
			err := p.resolve(ctx, f)
			switch {
			case err == nil:
				rep.Completed = append(rep.Completed, id)
			case errors.Is(err, ErrRefused):
				rep.Aborted = append(rep.Aborted, id)
			case ctx.Err() != nil:
				return rep, err
			default:
				rep.Pending[id] = err
			}
		}
	}
	return rep, nil
}

// Reconcile brings a fenced or lost ledger of owner back into service. It reads every other
// ledger and:
//
//   - drops from owner every free or held permit that another owner has (free, held, or
//     frozen in a transfer the target has not accepted): the stale copy would double it;
//   - restores transfers into owner that their source completed (so owner had accepted
//     them) but that owner's ledger has lost, unless their permits are elsewhere now;
//   - for an outgoing transfer still frozen in owner's old state, not accepted by its target,
//     whose permits are elsewhere now (it was aborted and they moved on), keeps only the
//     permits nobody else has and cancels it (target refusal, then abort), so neither the
//     abort nor a late delivery of the old message can bring the others back;
//   - moves owner's sequence above every witness of the pool and clears the fence, so every
//     fencing token granted from now on is larger than any acknowledged token before.
//
// What Reconcile cannot know is which jobs got grants that the lost state forgot: their
// permits look free and may be granted again. Safety then rests on the downstream checking
// fencing tokens (the new grant's token is larger), or on the operator waiting until those
// jobs are gone. Run Reconcile while no transfer involving owner is in flight (stop any
// rebalancer first); it returns an error when the ledger is neither fenced nor missing.
func (p *Pool) Reconcile(ctx context.Context, owner string) error {
	l, err := p.ledger(owner)
	if err != nil {
		return err
	}
	snaps, wit, err := p.snapshots(ctx)
	if err != nil {
		return err
	}
	var me ledgerSnapshot
	byOwner := map[string]ledgerSnapshot{}
	for _, s := range snaps {
		byOwner[s.owner] = s
		if s.owner == owner {
			me = s
		}
	}
	if me.exists && !me.fenced && me.seq >= wit[owner] {
		return fmt.Errorf("escrow: Reconcile(%q): ledger is not fenced (seq %d, witness %d)", owner, me.seq, wit[owner])
	}
	elsewhere := map[int]bool{}
	for _, s := range snaps {
		if s.owner == owner {
			continue
		}
		for _, n := range s.free {
			elsewhere[n] = true
		}
		for n := range s.held {
			elsewhere[n] = true
		}
		for id, rec := range s.out {
			if rec.S == "frozen" && byOwner[rec.To].in[inKey(s.owner, id)].S != "accepted" {
				for _, n := range rec.P {
					elsewhere[n] = true
				}
			}
		}
	}
	var drop []int
	mine := map[int]bool{}
	for _, n := range me.free {
		mine[n] = true
		if elsewhere[n] {
			drop = append(drop, n)
		}
	}
	for n := range me.held {
		mine[n] = true
		if elsewhere[n] {
			drop = append(drop, n)
		}
	}
	type addEntry struct {
		T    string `json:"t"`
		From string `json:"from"`
		P    []int  `json:"p"`
	}
	type trimEntry struct {
		T string `json:"t"`
		P []int  `json:"p"`
	}
	plan := struct {
		Drop []int       `json:"drop"`
		Add  []addEntry  `json:"add"`
		Trim []trimEntry `json:"trim"`
	}{Drop: drop, Add: []addEntry{}, Trim: []trimEntry{}}
	for _, s := range snaps {
		if s.owner == owner {
			continue
		}
		for id, rec := range s.out {
			if rec.S != "done" || rec.To != owner {
				continue
			}
			if _, ok := me.in[inKey(s.owner, id)]; ok {
				continue
			}
			var keep []int
			for _, n := range rec.P {
				if !elsewhere[n] && !mine[n] {
					keep = append(keep, n)
				}
			}
			if len(keep) > 0 {
				plan.Add = append(plan.Add, addEntry{T: id, From: s.owner, P: keep})
			}
		}
	}
	// Outgoing transfers frozen in the (old) ledger whose target has not accepted them, but
	// whose permits are elsewhere now (the transfer was aborted and the permits moved on):
	// keep only the permits nobody else has, and cancel them below, so that neither an abort
	// nor a late delivery can bring the others back.
	var cancel []string
	for id, rec := range me.out {
		if rec.S != "frozen" || byOwner[rec.To].in[inKey(owner, id)].S == "accepted" {
			continue
		}
		keep := []int{}
		for _, n := range rec.P {
			if !elsewhere[n] {
				keep = append(keep, n)
			}
		}
		if len(keep) < len(rec.P) {
			plan.Trim = append(plan.Trim, trimEntry{T: id, P: keep})
			cancel = append(cancel, id)
		}
	}
	if plan.Drop == nil {
		plan.Drop = []int{}
	}
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	// The new sequence goes above every witness of the pool, not only owner's: the lost state
	// may have held permits that had moved to or from other owners, and their holders' tokens
	// are bounded by those witnesses.
	top := int64(0)
	for _, w := range wit {
		top = max(top, w)
	}
	args := []any{top, p.opts.Capacity, l.first, l.last, string(planJSON)}
	r, err := runScript(ctx, p.c, reconcileScript, l.keys, args...)
	if err != nil {
		return fmt.Errorf("escrow: reconcile %q: %w", owner, err)
	}
	if r.status != "ok" {
		return l.common(r, wit[owner])
	}
	p.stats.reconciled.Add(1)
	if err := p.raise(ctx, owner, r.int(0)); err != nil {
		return err
	}
	sort.Strings(cancel)
	for _, id := range cancel {
		if err := p.Cancel(ctx, owner, id); err != nil {
			return fmt.Errorf("escrow: reconcile %q: cancel trimmed transfer %q: %w", owner, id, err)
		}
	}
	return nil
}
