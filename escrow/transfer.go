package escrow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Frozen describes a transfer as recorded at its source by Freeze.
type Frozen struct {
	// ID is the transfer ID T.
	ID string
	// From and To are the source and target owners.
	From, To string
	// Permits are the frozen permit numbers.
	Permits []int
	// Seq is the source's ledger sequence at the freeze; the target moves its own sequence
	// above it on accept, so fencing tokens keep rising as permits move.
	Seq int64
	// State is "frozen", "done" (completed) or "aborted".
	State string
}

func (p *Pool) checkTransfer(from, to string, k int, id string) (ledger, ledger, error) {
	src, err := p.ledger(from)
	if err != nil {
		return ledger{}, ledger{}, err
	}
	dst, err := p.ledger(to)
	if err != nil {
		return ledger{}, ledger{}, err
	}
	if err := checkID("transfer ID", id); err != nil {
		return ledger{}, ledger{}, err
	}
	switch {
	case from == to:
		return ledger{}, ledger{}, fmt.Errorf("%w: transfer from %q to itself", ErrInvalid, from)
	case k < 1 || k > p.opts.Capacity:
		return ledger{}, ledger{}, fmt.Errorf("%w: k must be 1..%d, got %d", ErrInvalid, p.opts.Capacity, k)
	}
	return src, dst, nil
}

// Freeze is step 1 of a transfer: it durably freezes k of from's free permits under transfer
// ID id, to be delivered to to. From this commit on, from can no longer grant them. Freeze is
// idempotent by id: a repeat returns the stored record (in whatever state it is now); reusing
// id with another target or k is ErrConflict. Before it counts from's free permits, a new
// freeze takes back the permits whose lease ended more than LeaseSkew ago (as Acquire and
// Sweep do), so a dead holder's permits can move. Fewer than k free permits then is
// ErrInsufficient and freezes nothing.
func (p *Pool) Freeze(ctx context.Context, from, to string, k int, id string) (Frozen, error) {
	src, _, err := p.checkTransfer(from, to, k, id)
	if err != nil {
		return Frozen{}, err
	}
	w, err := p.readWitness(ctx, from)
	if err != nil {
		return Frozen{}, err
	}
	r, err := runScript(ctx, p.c, freezeScript, src.keys, id, to, k, w, p.opts.LeaseSkew.Milliseconds())
	if err != nil {
		return Frozen{}, fmt.Errorf("escrow: freeze %q: %w", id, err)
	}
	switch r.status {
	case "ok":
		p.stats.reclaimed.Add(uint64(r.int(5)))
		var rec transferRecord
		if err := json.Unmarshal([]byte(r.str(2)), &rec); err != nil {
			return Frozen{}, fmt.Errorf("escrow: freeze %q: bad record: %w", id, err)
		}
		f := Frozen{ID: id, From: from, To: to, Permits: rec.P, Seq: rec.Seq, State: rec.S}
		if err := p.confirm(ctx, from, r.seg(3)); err != nil {
			p.stats.fenced.Add(boolToUint(errors.Is(err, ErrFenced)))
			return Frozen{}, err
		}
		p.stats.frozen.Add(boolToUint(r.str(4) == "new"))
		return f, nil
	case "insufficient":
		p.stats.reclaimed.Add(uint64(r.int(1)))
		return Frozen{}, fmt.Errorf("%w: owner %q has %d free, transfer %q wants %d", ErrInsufficient, from, r.int(0), id, k)
	case "conflict":
		return Frozen{}, fmt.Errorf("%w: transfer %q exists with other parameters: %s", ErrConflict, id, r.str(0))
	}
	p.stats.fenced.Add(boolToUint(errors.Is(src.common(r, w), ErrFenced)))
	return Frozen{}, src.common(r, w)
}

// Deliver is step 2: the target f.To accepts transfer f.ID exactly once and adds the permits
// to its free set. A duplicate delivery (a retry, a lost reply, a second Recover) returns nil
// and adds nothing. If the target has durably refused f.ID, Deliver returns ErrRefused.
// Deliver is also how anyone asks the target about T: nil means T is accepted. The target
// cannot check f against the source (another slot), so f must be a record returned by
// Freeze: a made-up permit list would add permits that exist elsewhere.
func (p *Pool) Deliver(ctx context.Context, f Frozen) error {
	if _, _, err := p.checkTransfer(f.From, f.To, max(len(f.Permits), 1), f.ID); err != nil {
		return err
	}
	if len(f.Permits) == 0 {
		return fmt.Errorf("%w: transfer %q carries no permits", ErrInvalid, f.ID)
	}
	dst := p.ledgers[f.To]
	w, err := p.readWitness(ctx, f.To)
	if err != nil {
		return err
	}
	r, err := runScript(ctx, p.c, acceptScript, dst.keys, acceptArgs(f, w)...)
	if err != nil {
		return fmt.Errorf("escrow: deliver %q: %w", f.ID, err)
	}
	switch r.status {
	case "ok":
		if err := p.confirm(ctx, f.To, r.seg(2)); err != nil {
			return err
		}
		if r.str(0) == "new" {
			p.stats.accepted.Add(1)
		}
		return nil
	case "refused":
		// The source aborts on this answer: witness it first, so that a target that loses the
		// refusal is fenced instead of accepting a late delivery.
		if err := p.confirm(ctx, f.To, r.seg(1)); err != nil {
			return err
		}
		return fmt.Errorf("%w: %q refused transfer %q", ErrRefused, f.To, f.ID)
	case "conflict":
		return fmt.Errorf("%w: permit %d of transfer %q already exists at %q", ErrConflict, r.int(0), f.ID, f.To)
	}
	return dst.common(r, w)
}

// acceptArgs are accept.lua's arguments for delivering f to a target whose witness is at w.
func acceptArgs(f Frozen, w int64) []any {
	args := []any{f.ID, f.From, f.Seq, w}
	for _, n := range f.Permits {
		args = append(args, n)
	}
	return args
}

// refuse records at to that transfer id from from will never be accepted. It returns
// accepted=true if to had accepted id before (then the refusal is not recorded).
func (p *Pool) refuse(ctx context.Context, from, to, id string) (accepted bool, err error) {
	dst := p.ledgers[to]
	w, err := p.readWitness(ctx, to)
	if err != nil {
		return false, err
	}
	r, err := runScript(ctx, p.c, refuseScript, dst.keys, id, from, w)
	if err != nil {
		return false, fmt.Errorf("escrow: refuse %q: %w", id, err)
	}
	switch r.status {
	case "accepted":
		// The source completes on this answer: witness it first, as Deliver does.
		return true, p.confirm(ctx, to, r.seg(1))
	case "refused":
		return false, p.confirm(ctx, to, r.seg(1))
	}
	return false, dst.common(r, w)
}

// settle runs step 3 at the source: op is "complete" or "abort".
func (p *Pool) settle(ctx context.Context, from, id, op string) error {
	src, err := p.ledger(from)
	if err != nil {
		return err
	}
	if err := checkID("transfer ID", id); err != nil {
		return err
	}
	w, err := p.readWitness(ctx, from)
	if err != nil {
		return err
	}
	r, err := runScript(ctx, p.c, settleScript, src.keys, id, op, w)
	if err != nil {
		return fmt.Errorf("escrow: %s %q: %w", op, id, err)
	}
	switch r.status {
	case "ok":
		if err := p.confirm(ctx, from, r.seg(3)); err != nil {
			return err
		}
		if r.str(2) == "new" {
			if op == "complete" {
				p.stats.completed.Add(1)
			} else {
				p.stats.aborted.Add(1)
			}
		}
		return nil
	case "unknown":
		return fmt.Errorf("%w: %q has no transfer %q", ErrUnknownTransfer, from, id)
	case "aborted":
		return fmt.Errorf("%w: cannot complete %q", ErrAborted, id)
	case "done":
		return fmt.Errorf("%w: transfer %q is already completed, cannot abort", ErrConflict, id)
	}
	return src.common(r, w)
}

// Complete is step 3: the source records that transfer id is done and forgets its frozen
// permits. Call it only after Deliver returned nil (the target accepted). It is idempotent.
func (p *Pool) Complete(ctx context.Context, from, id string) error {
	return p.settle(ctx, from, id, "complete")
}

// Transfer moves k free permits from from to to under transfer ID id: Freeze, Deliver,
// Complete. It is idempotent by id at every step, so after any error (a lost reply, a
// cancelled context, a crash) the same call can be repeated, or Recover can finish the job.
// If the target has refused id, the source aborts it and Transfer returns ErrRefused.
// A lost acknowledgement is never resolved by waiting: only the target's answer about id
// decides whether the source completes or aborts.
func (p *Pool) Transfer(ctx context.Context, from, to string, k int, id string) error {
	f, err := p.Freeze(ctx, from, to, k, id)
	if err != nil {
		return err
	}
	return p.resolve(ctx, f)
}

// resolve drives a frozen transfer to its end by asking the target.
func (p *Pool) resolve(ctx context.Context, f Frozen) error {
	switch f.State {
	case "done":
		return nil
	case "aborted":
		return fmt.Errorf("%w: transfer %q", ErrAborted, f.ID)
	}
	if len(f.Permits) == 0 {
		// Trimmed to nothing by Reconcile: there is nothing to deliver, only to cancel.
		if err := p.Cancel(ctx, f.From, f.ID); err != nil {
			return err
		}
		return fmt.Errorf("%w: transfer %q had no permits left", ErrRefused, f.ID)
	}
	err := p.Deliver(ctx, f)
	if errors.Is(err, ErrRefused) {
		if aerr := p.settle(ctx, f.From, f.ID, "abort"); aerr != nil {
			return aerr
		}
		return err
	}
	if err != nil {
		return err
	}
	return p.Complete(ctx, f.From, f.ID)
}

// Cancel aborts a pending transfer if the target has not accepted it: it first makes the
// target durably refuse id, then returns the frozen permits to the source. If the target
// had already accepted id, Cancel completes it instead and returns ErrConflict. Cancelling a
// transfer already aborted returns nil; one already completed returns ErrConflict.
func (p *Pool) Cancel(ctx context.Context, from, id string) error {
	src, err := p.ledger(from)
	if err != nil {
		return err
	}
	if err := checkID("transfer ID", id); err != nil {
		return err
	}
	snap, err := src.snapshot(ctx, p.c)
	if err != nil {
		return err
	}
	rec, ok := snap.out[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q has no transfer %q", ErrUnknownTransfer, from, id)
	case rec.S == "aborted":
		return nil
	case rec.S == "done":
		return fmt.Errorf("%w: transfer %q is already completed", ErrConflict, id)
	}
	accepted, err := p.refuse(ctx, from, rec.To, id)
	if err != nil {
		return err
	}
	if accepted {
		if err := p.Complete(ctx, from, id); err != nil {
			return err
		}
		return fmt.Errorf("%w: %q had accepted transfer %q; it was completed", ErrConflict, rec.To, id)
	}
	return p.settle(ctx, from, id, "abort")
}

func boolToUint(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
