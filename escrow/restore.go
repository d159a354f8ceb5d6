package escrow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/celebrity-go/celebrity/internal/slot"
)

// restoreSource names the source of the records RestoreLost leaves at an owner. Owner names
// cannot contain braces, so it never collides with a real owner's transfer record.
const restoreSource = "{restore}"

// RestoreLost puts back at owner every permit that no ledger of the pool has any more
// (AuditReport.Missing: a lost ledger that Reconcile brought back without them, or grants
// its lost state forgot), and returns them. Call it only after confirming that no job that
// held one of them still runs: the package cannot know who did. It refuses (ErrConflict)
// while the audit shows pending transfers (run Recover), duplicates, or fenced or missing
// ledgers (run Reconcile), since a permit in flight between two ledgers can look missing.
// Stop any rebalancer first.
//
// The call is audited: owner's ledger records the permits under id as an incoming transfer
// from "{restore}", the call is logged to Logger and counted in Stats.Restored, and owner's
// sequence moves above every witness of the pool, so the new grants' tokens are above any
// old holder's. It is idempotent by id.
//
// One restore runs at a time, pool-wide: a register on the witness client (key
// Prefix{Name:}:restore) is read before the pool, and the restore is claimed there only if no
// other restore was claimed since; otherwise RestoreLost returns ErrConflict (audit again).
// A restore claimed and not finished (its process died) blocks the others with ErrConflict
// until it is retried with the same id and owner, which puts back the permits it claimed.
func (p *Pool) RestoreLost(ctx context.Context, owner, id string) ([]int, error) {
	l, err := p.ledger(owner)
	if err != nil {
		return nil, err
	}
	if err := checkID("restore ID", id); err != nil {
		return nil, err
	}
	missing, err := p.claimRestore(ctx, owner, id)
	if err != nil || missing == nil {
		return nil, err
	}
	wit, err := p.readWitnesses(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.applyPlan(ctx, l, restorePlan(id, missing), wit, "", "restore lost permits at", nil); err != nil {
		return nil, err
	}
	if _, err := runScript(ctx, p.w, restoreScript, []string{p.restoreKey()}, "done", id); err != nil {
		return nil, fmt.Errorf("escrow: release restore %q: %w", id, err)
	}
	p.stats.restored.Add(uint64(len(missing)))
	if p.opts.Logger != nil {
		p.opts.Logger.Warn("escrow: lost permits restored by RestoreLost", "owner", owner, "id", id, "permits", missing)
	}
	return missing, nil
}

// restorePlan is the plan that puts the missing permits back at a ledger, recorded as an
// incoming transfer id from restoreSource.
func restorePlan(id string, missing []int) reconcilePlan {
	return reconcilePlan{Drop: []int{}, Release: []string{}, Refuse: []planRefuse{}, Trim: []planTrim{},
		Add: []planAdd{{T: id, From: restoreSource, P: missing}}}
}

// claimRestore claims the pool's restore register for restore id at owner and returns the
// permits it puts back, or nil when nothing is missing. One restore at a time, pool-wide: the
// register is read before the pool, and the claim succeeds only if no restore was claimed
// since, so a restore paused between its reading of the pool and its write cannot put back
// permits another restore has put back. A retry of a claimed restore resumes it.
func (p *Pool) claimRestore(ctx context.Context, owner, id string) ([]int, error) {
	reg := p.restoreKey()
	rr, err := runScript(ctx, p.w, restoreScript, []string{reg}, "read", id)
	if err != nil {
		return nil, fmt.Errorf("escrow: read the restore register: %w", err)
	}
	if busy := rr.str(1); busy != "" {
		if busy != id {
			return nil, fmt.Errorf("%w: RestoreLost %q is under way; retry it with its ID first", ErrConflict, busy)
		}
		return resumedPermits(id, owner, rr.str(2), rr.str(3))
	}
	snaps, wit, err := p.snapshots(ctx)
	if err != nil {
		return nil, err
	}
	rep := buildReport(p.opts.Capacity, snaps, wit, p.opts.LeaseSkew)
	if len(rep.Pending) > 0 || len(rep.Duplicated) > 0 || len(rep.Problems) > 0 {
		return nil, fmt.Errorf("%w: RestoreLost needs a settled pool (run Recover and Reconcile first): %s", ErrConflict, rep)
	}
	if len(rep.Missing) == 0 {
		return nil, nil
	}
	pm, err := json.Marshal(rep.Missing)
	if err != nil {
		return nil, err
	}
	r, err := runScript(ctx, p.w, restoreScript, []string{reg}, "claim", id, rr.int(0), owner, string(pm))
	if err != nil {
		return nil, fmt.Errorf("escrow: claim restore %q: %w", id, err)
	}
	return claimed(r, id, owner, rep.Missing)
}

// claimed interprets restore.lua's answer to a claim of restore id at owner for the permits
// missing.
func claimed(r reply, id, owner string, missing []int) ([]int, error) {
	switch r.status {
	case "ok":
		return missing, nil
	case "resume":
		return resumedPermits(id, owner, r.str(0), r.str(1))
	case "busy":
		return nil, fmt.Errorf("%w: RestoreLost %q is under way; retry it with its ID first", ErrConflict, r.str(0))
	case "moved":
		return nil, fmt.Errorf("%w: another RestoreLost ran while this one read the pool; audit again", ErrConflict)
	}
	return nil, fmt.Errorf("escrow: claim restore %q: %s %s", id, r.status, r.str(0))
}

// resumedPermits returns the permits that restore id, claimed for claimedOwner, recorded in
// the register (JSON), refusing a retry for another owner.
func resumedPermits(id, owner, claimedOwner, permits string) ([]int, error) {
	if claimedOwner != owner {
		return nil, fmt.Errorf("%w: RestoreLost %q was claimed for owner %q", ErrConflict, id, claimedOwner)
	}
	var missing []int
	if err := json.Unmarshal([]byte(permits), &missing); err != nil {
		return nil, fmt.Errorf("escrow: restore register of %q: %w", id, err)
	}
	if missing == nil {
		missing = []int{}
	}
	return missing, nil
}

// restoreKey returns the key of the pool's restore register (on the witness client). Its tag
// "Name:" names no ledger (owner names are not empty) and no Central (names hold no ':').
func (p *Pool) restoreKey() string { return slot.Tagged(p.opts.Prefix, p.opts.Name+":") + ":restore" }

// readWitnesses reads the top of every owner's witness chain.
func (p *Pool) readWitnesses(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64, len(p.order))
	for _, name := range p.order {
		w, err := p.readWitness(ctx, name)
		if err != nil {
			return nil, err
		}
		out[name] = w
	}
	return out, nil
}
