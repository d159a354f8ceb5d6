package escrow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Reconcile brings a fenced or lost ledger of owner back into service. It reads every other
// ledger, the witness chain of owner and owner's log, and:
//
//   - drops from owner every free or held permit that another owner has (free, held, or
//     frozen in a transfer the target has not accepted): the stale copy would double it;
//   - frees the permits of jobs granted after the point where owner's history left the one
//     its witness confirmed: those grants were never acknowledged, and a retry must not find
//     them again with a token another job may hold;
//   - for every transfer into owner that owner's ledger has no answer about, records the
//     answer the source acted on: accepted (with only the permits nobody else has now) when
//     the source completed it or still has it frozen, so the source may complete it and a
//     redelivery adds nothing; refused when the source aborted it, so a late delivery fails;
//   - for an outgoing transfer still frozen in owner's old state, not accepted by its target,
//     whose permits are elsewhere now (it was aborted and they moved on), keeps only the
//     permits nobody else has and cancels it (target refusal, then abort), so neither the
//     abort nor a late delivery of the old message can bring the others back;
//   - moves owner's sequence above every witness of the pool, clears the fence and starts
//     owner's witness chain anew at that step, so every fencing token granted from now on is
//     larger than any acknowledged token before.
//
// What Reconcile cannot know is which jobs got acknowledged grants that the lost state
// forgot: their permits look free and may be granted again. Safety then rests on the
// downstream checking fencing tokens (the new grant's token is larger), or on the operator
// waiting until those jobs are gone. Run Reconcile while no transfer involving owner is in
// flight (stop any rebalancer first); it returns an error when the ledger is neither fenced
// nor missing. Recover may run after it. Reconcile writes only if the ledger is still in the
// state it read (missing, or fenced at the same sequence); if another Reconcile repaired it in
// between, it returns ErrConflict and writes nothing. Under DefaultPrefix, it creates no
// ledger for a pool that exists under PreviousDefaultPrefix: ErrPreviousPrefix, as Init.
func (p *Pool) Reconcile(ctx context.Context, owner string) error {
	l, err := p.ledger(owner)
	if err != nil {
		return err
	}
	snaps, wit, err := p.snapshots(ctx)
	if err != nil {
		return err
	}
	byOwner := byOwnerOf(snaps)
	me := byOwner[owner]
	if !me.exists { // Reconcile would create the ledger: not beside one under the old default
		if err := p.prev.check(ctx, p.c, p.w); err != nil {
			return err
		}
	}
	if me.exists && !me.fenced && me.seq >= wit[owner] {
		return fmt.Errorf("escrow: Reconcile(%q): ledger is not fenced (seq %d, witness %d)", owner, me.seq, wit[owner])
	}
	if me.exists && !me.fenced {
		// Behind its witness but not marked yet: mark it, so that its state cannot move
		// between this reading and the write below, and read the pool again.
		if err := p.fence(ctx, owner, me.seq, wit[owner]); !errors.As(err, new(*FencedError)) {
			return err
		}
		return p.Reconcile(ctx, owner)
	}
	confirmed, err := p.confirmedUpTo(ctx, owner)
	if err != nil {
		return err
	}
	plan, cancel := planReconcile(owner, byOwner, p.order, confirmed)
	// The plan is computed from this reading. The script applies it only to the state read
	// (still missing, or still fenced at the same sequence): a fenced ledger does not move,
	// and every Reconcile moves the sequence up and clears the fence, so a Reconcile paused
	// across another one (and the grants after it) cannot apply its stale plan.
	if err := p.applyPlan(ctx, l, plan, wit, expectedState(me), "reconcile", &p.stats.reconciled); err != nil {
		return err
	}
	return p.cancelTrimmed(ctx, owner, cancel)
}

// cancelTrimmed cancels the outgoing transfers of owner that Reconcile's plan trimmed (see
// planReconcile), after the plan is applied.
func (p *Pool) cancelTrimmed(ctx context.Context, owner string, ids []string) error {
	for _, id := range ids {
		if err := p.Cancel(ctx, owner, id); err != nil {
			return fmt.Errorf("escrow: reconcile %q: cancel trimmed transfer %q: %w", owner, id, err)
		}
	}
	return nil
}

// byOwnerOf indexes snapshots by owner.
func byOwnerOf(snaps []ledgerSnapshot) map[string]ledgerSnapshot {
	byOwner := make(map[string]ledgerSnapshot, len(snaps))
	for _, s := range snaps {
		byOwner[s.owner] = s
	}
	return byOwner
}

// expectedState names the state of the ledger read in me, as reconcile.lua checks it:
// "missing", or the sequence the ledger is fenced at.
func expectedState(me ledgerSnapshot) string {
	if !me.exists {
		return "missing"
	}
	return strconv.FormatInt(me.seq, 10)
}

// confirmedUpTo reads owner's witness chain and log and returns the sequence up to which the
// ledger's history is the confirmed one (see divergence).
func (p *Pool) confirmedUpTo(ctx context.Context, owner string) (int64, error) {
	chain, err := bound.Do(ctx, func() ([]redis.Z, error) { return p.w.ZRangeWithScores(ctx, p.witness[owner], 0, -1).Result() })
	if err != nil {
		return 0, fmt.Errorf("escrow: read witness chain of %q: %w", owner, err)
	}
	logged, err := bound.Do(ctx, func() ([]redis.Z, error) { return p.c.ZRangeWithScores(ctx, p.ledgers[owner].log(), 0, -1).Result() })
	if err != nil {
		return 0, fmt.Errorf("escrow: read log of %q: %w", owner, err)
	}
	return divergence(chain, logged), nil
}

// applyPlan runs reconcile.lua with plan on l, expecting the ledger in the state expect
// ('missing', the sequence it is fenced at, or ” for no check), counts the change in applied
// (when not nil), and starts l's witness chain anew at the script's step. The new sequence
// goes above every witness of the pool, not only the owner's: the lost state may have held
// permits that had moved to or from other owners, and their holders' tokens are bounded by
// those witnesses. what names the operation in errors.
func (p *Pool) applyPlan(ctx context.Context, l ledger, plan reconcilePlan, wit map[string]int64, expect, what string, applied *atomic.Uint64) error {
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	top := int64(0)
	for _, w := range wit {
		top = max(top, w)
	}
	r, err := runScript(ctx, p.c, reconcileScript, l.keys, top, p.opts.Capacity, l.first, l.last, string(planJSON), expect)
	if err != nil {
		return fmt.Errorf("escrow: %s %q: %w", what, l.owner, err)
	}
	if r.status == "moved" {
		return fmt.Errorf("%w: Reconcile(%q): the ledger changed after it was read (another Reconcile ran); its state is now seq %d", ErrConflict, l.owner, r.int(0))
	}
	if r.status != "ok" {
		return l.common(r, wit[l.owner])
	}
	if applied != nil {
		applied.Add(1)
	}
	seg := r.seg(1)
	if len(seg) == 0 {
		return fmt.Errorf("escrow: %s %q: no log", what, l.owner)
	}
	st, _, err := p.extend(ctx, l.owner, "rebase", seg[len(seg)-1:])
	if err != nil {
		return err
	}
	if st != "ok" {
		return fmt.Errorf("escrow: %s %q: the witness refused the new chain (%s)", what, l.owner, st)
	}
	return nil
}

// divergence returns the highest sequence at which the ledger's log and its witness chain
// hold the same step: the ledger's history is the confirmed one up to there. Without a chain
// every step counts as confirmed; without a common step, the steps below the chain's oldest
// are assumed confirmed (the log and the chain keep the same number of recent steps).
func divergence(chain, logged []redis.Z) int64 {
	if len(chain) == 0 {
		return math.MaxInt64
	}
	ids := make(map[int64]any, len(chain))
	for _, z := range chain {
		ids[int64(z.Score)] = z.Member
	}
	best := int64(-1)
	for _, z := range logged {
		if id, ok := ids[int64(z.Score)]; ok && id == z.Member {
			best = max(best, int64(z.Score))
		}
	}
	if best >= 0 {
		return best
	}
	low := int64(chain[0].Score)
	if len(logged) > 0 {
		low = min(low, int64(logged[0].Score))
	}
	return low - 1
}

// jobToken returns the token of a job record "permit:token" (0 if malformed).
func jobToken(rec string) int64 {
	i := strings.IndexByte(rec, ':')
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseInt(rec[i+1:], 10, 64)
	return n
}
