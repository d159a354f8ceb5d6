package escrow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/slot"
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
			// The freezes may not be confirmed yet (their process died before the witness
			// step). Recover acts on them, so it has them confirmed first: a source that loses
			// them is then fenced instead of granting permits the target has too.
			if err := p.confirmCurrent(ctx, name); err != nil {
				for _, id := range ids {
					rep.Pending[id] = err
				}
				continue
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
// between, it returns ErrConflict and writes nothing.
func (p *Pool) Reconcile(ctx context.Context, owner string) error {
	l, err := p.ledger(owner)
	if err != nil {
		return err
	}
	snaps, wit, err := p.snapshots(ctx)
	if err != nil {
		return err
	}
	byOwner := map[string]ledgerSnapshot{}
	for _, s := range snaps {
		byOwner[s.owner] = s
	}
	me := byOwner[owner]
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
	// The plan below is computed from this reading. The script applies it only to the state
	// read (still missing, or still fenced at the same sequence): a fenced ledger does not
	// move, and every Reconcile moves the sequence up and clears the fence, so a Reconcile
	// paused across another one (and the grants after it) cannot apply its stale plan.
	expect := "missing"
	if me.exists {
		expect = strconv.FormatInt(me.seq, 10)
	}
	chain, err := p.w.ZRangeWithScores(ctx, p.witness[owner], 0, -1).Result()
	if err != nil {
		return fmt.Errorf("escrow: read witness chain of %q: %w", owner, err)
	}
	logged, err := p.c.ZRangeWithScores(ctx, l.keys[6], 0, -1).Result()
	if err != nil {
		return fmt.Errorf("escrow: read log of %q: %w", owner, err)
	}
	plan, cancel := planReconcile(owner, byOwner, p.order, divergence(chain, logged))
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
	args := []any{top, p.opts.Capacity, l.first, l.last, string(planJSON), expect}
	r, err := runScript(ctx, p.c, reconcileScript, l.keys, args...)
	if err != nil {
		return fmt.Errorf("escrow: reconcile %q: %w", owner, err)
	}
	if r.status == "moved" {
		return fmt.Errorf("%w: Reconcile(%q): the ledger changed after it was read (another Reconcile ran); its state is now seq %d", ErrConflict, owner, r.int(0))
	}
	if r.status != "ok" {
		return l.common(r, wit[owner])
	}
	p.stats.reconciled.Add(1)
	seg := r.seg(1)
	if len(seg) == 0 {
		return fmt.Errorf("escrow: reconcile %q: no log", owner)
	}
	st, _, err := p.extend(ctx, owner, "rebase", seg[len(seg)-1:])
	if err != nil {
		return err
	}
	if st != "ok" {
		return fmt.Errorf("escrow: reconcile %q: the witness refused the new chain (%s)", owner, st)
	}
	for _, id := range cancel {
		if err := p.Cancel(ctx, owner, id); err != nil {
			return fmt.Errorf("escrow: reconcile %q: cancel trimmed transfer %q: %w", owner, id, err)
		}
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

// reconcilePlan is the JSON plan reconcile.lua applies.
type reconcilePlan struct {
	Drop    []int        `json:"drop"`
	Release []string     `json:"release"`
	Add     []planAdd    `json:"add"`
	Refuse  []planRefuse `json:"refuse"`
	Trim    []planTrim   `json:"trim"`
}

type planAdd struct {
	T    string `json:"t"`
	From string `json:"from"`
	P    []int  `json:"p"`
}

type planRefuse struct {
	T    string `json:"t"`
	From string `json:"from"`
}

type planTrim struct {
	T string `json:"t"`
	P []int  `json:"p"`
}

// planReconcile computes what Reconcile changes at owner (pure: tested without Redis), and
// which of owner's outgoing transfers it cancels afterwards. confirmed is the sequence up to
// which owner's history is the one its witness confirmed.
func planReconcile(owner string, byOwner map[string]ledgerSnapshot, order []string, confirmed int64) (reconcilePlan, []string) {
	me := byOwner[owner]
	// places maps every permit found at another owner to where: "T\x00src\x00id" for a
	// permit frozen in a transfer its target has not accepted, anything else otherwise.
	places := map[int][]string{}
	for _, name := range order {
		s := byOwner[name]
		if name == owner {
			continue
		}
		for _, n := range s.free {
			places[n] = append(places[n], "free")
		}
		for n := range s.held {
			places[n] = append(places[n], "held")
		}
		for id, rec := range s.out {
			if rec.S == "frozen" && byOwner[rec.To].in[inKey(name, id)].S != "accepted" {
				for _, n := range rec.P {
					places[n] = append(places[n], "T\x00"+name+"\x00"+id)
				}
			}
		}
	}
	elsewhere := func(n int, except string) bool {
		for _, w := range places[n] {
			if w != except {
				return true
			}
		}
		return false
	}
	plan := reconcilePlan{Drop: []int{}, Release: []string{}, Add: []planAdd{}, Refuse: []planRefuse{}, Trim: []planTrim{}}
	mine := map[int]bool{}
	for _, n := range me.free {
		mine[n] = true
		if elsewhere(n, "") {
			plan.Drop = append(plan.Drop, n)
		}
	}
	for n, job := range me.held {
		mine[n] = true
		if elsewhere(n, "") {
			plan.Drop = append(plan.Drop, n)
		} else if tok := jobToken(me.jobs[job]); tok > confirmed {
			plan.Release = append(plan.Release, job)
		}
	}
	sort.Ints(plan.Drop)
	sort.Strings(plan.Release)
	for _, name := range order {
		if name == owner {
			continue
		}
		s := byOwner[name]
		ids := make([]string, 0, len(s.out))
		for id := range s.out {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			rec := s.out[id]
			if rec.To != owner {
				continue
			}
			if _, ok := me.in[inKey(name, id)]; ok {
				continue
			}
			switch rec.S {
			case "aborted":
				plan.Refuse = append(plan.Refuse, planRefuse{T: id, From: name})
			case "done", "frozen":
				self := "T\x00" + name + "\x00" + id
				keep := []int{}
				for _, n := range rec.P {
					if !elsewhere(n, self) && !mine[n] {
						keep = append(keep, n)
					}
				}
				plan.Add = append(plan.Add, planAdd{T: id, From: name, P: keep})
			}
		}
	}
	// Outgoing transfers frozen in the (old) ledger whose target has not accepted them, but
	// whose permits are elsewhere now (the transfer was aborted and the permits moved on):
	// keep only the permits nobody else has, and cancel them afterwards, so that neither an
	// abort nor a late delivery can bring the others back.
	var cancel []string
	for id, rec := range me.out {
		if rec.S != "frozen" || byOwner[rec.To].in[inKey(owner, id)].S == "accepted" {
			continue
		}
		keep := []int{}
		for _, n := range rec.P {
			if !elsewhere(n, "") {
				keep = append(keep, n)
			}
		}
		if len(keep) < len(rec.P) {
			plan.Trim = append(plan.Trim, planTrim{T: id, P: keep})
			cancel = append(cancel, id)
		}
	}
	sort.Strings(cancel)
	return plan, cancel
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
	// One restore at a time, pool-wide: the register is read before the pool, and the claim
	// succeeds only if no restore was claimed since, so a restore paused between its reading
	// of the pool and its write cannot put back permits another restore has put back.
	reg := p.restoreKey()
	rr, err := runScript(ctx, p.w, restoreScript, []string{reg}, "read", id)
	if err != nil {
		return nil, fmt.Errorf("escrow: read the restore register: %w", err)
	}
	n := rr.int(0)
	var missing []int
	if busy := rr.str(1); busy != "" {
		if busy != id {
			return nil, fmt.Errorf("%w: RestoreLost %q is under way; retry it with its ID first", ErrConflict, busy)
		}
		if o := rr.str(2); o != owner {
			return nil, fmt.Errorf("%w: RestoreLost %q was claimed for owner %q", ErrConflict, id, o)
		}
		if err := json.Unmarshal([]byte(rr.str(3)), &missing); err != nil {
			return nil, fmt.Errorf("escrow: restore register of %q: %w", id, err)
		}
	} else {
		snaps, wit, err := p.snapshots(ctx)
		if err != nil {
			return nil, err
		}
		rep := buildReport(p.opts.Capacity, snaps, wit)
		if len(rep.Pending) > 0 || len(rep.Duplicated) > 0 || len(rep.Problems) > 0 {
			return nil, fmt.Errorf("%w: RestoreLost needs a settled pool (run Recover and Reconcile first): %s", ErrConflict, rep)
		}
		if len(rep.Missing) == 0 {
			return nil, nil
		}
		missing = rep.Missing
		pm, err := json.Marshal(missing)
		if err != nil {
			return nil, err
		}
		r, err := runScript(ctx, p.w, restoreScript, []string{reg}, "claim", id, n, owner, string(pm))
		if err != nil {
			return nil, fmt.Errorf("escrow: claim restore %q: %w", id, err)
		}
		switch r.status {
		case "ok":
		case "resume":
			if r.str(0) != owner {
				return nil, fmt.Errorf("%w: RestoreLost %q was claimed for owner %q", ErrConflict, id, r.str(0))
			}
			if err := json.Unmarshal([]byte(r.str(1)), &missing); err != nil {
				return nil, fmt.Errorf("escrow: restore register of %q: %w", id, err)
			}
		case "busy":
			return nil, fmt.Errorf("%w: RestoreLost %q is under way; retry it with its ID first", ErrConflict, r.str(0))
		case "moved":
			return nil, fmt.Errorf("%w: another RestoreLost ran while this one read the pool; audit again", ErrConflict)
		default:
			return nil, fmt.Errorf("escrow: claim restore %q: %s %s", id, r.status, r.str(0))
		}
	}
	wit, err := p.readWitnesses(ctx)
	if err != nil {
		return nil, err
	}
	plan := reconcilePlan{Drop: []int{}, Release: []string{}, Refuse: []planRefuse{}, Trim: []planTrim{},
		Add: []planAdd{{T: id, From: restoreSource, P: missing}}}
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	top := int64(0)
	for _, w := range wit {
		top = max(top, w)
	}
	r, err := runScript(ctx, p.c, reconcileScript, l.keys, top, p.opts.Capacity, l.first, l.last, string(planJSON))
	if err != nil {
		return nil, fmt.Errorf("escrow: restore lost permits at %q: %w", owner, err)
	}
	if r.status != "ok" {
		return nil, l.common(r, wit[owner])
	}
	seg := r.seg(1)
	if len(seg) == 0 {
		return nil, fmt.Errorf("escrow: restore lost permits at %q: no log", owner)
	}
	if st, _, err := p.extend(ctx, owner, "rebase", seg[len(seg)-1:]); err != nil {
		return nil, err
	} else if st != "ok" {
		return nil, fmt.Errorf("escrow: restore lost permits at %q: the witness refused the new chain (%s)", owner, st)
	}
	if _, err := runScript(ctx, p.w, restoreScript, []string{reg}, "done", id); err != nil {
		return nil, fmt.Errorf("escrow: release restore %q: %w", id, err)
	}
	p.stats.restored.Add(uint64(len(missing)))
	if p.opts.Logger != nil {
		p.opts.Logger.Warn("escrow: lost permits restored by RestoreLost", "owner", owner, "id", id, "permits", missing)
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
