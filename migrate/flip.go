package migrate

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"slices"
	"time"

	"github.com/celebrity-go/celebrity/routing"
)

// closeSource (ClosedA): close the source for the old generation with one script (the
// barrier: every admitted write is at or before the returned log position, every later one
// is refused with routing.ErrStaleRoute), apply the log up to it, verify, and carry the
// tenants marked as moved out of a bucket over to the target.
func (c *Coordinator) closeSource(ctx context.Context, r *run) error {
	if r.splitting() {
		return c.splitClose(ctx, r)
	}
	if restarted, err := c.drainSource(ctx, r); err != nil || restarted {
		return err
	}
	v := r.ver
	if v == nil || v.id != r.ID {
		// Resumed without this process's pass: the source is closed, so a full pass is exact.
		var err error
		if v, err = c.verifyPass(ctx, r); err != nil {
			return err
		}
	}
	d, err := c.finish(ctx, r, v)
	if err != nil {
		return err
	}
	if err := c.carryMarks(ctx, r); err != nil {
		return err
	}
	// The copy is complete and verified: mark it, last (a fold-back: its note in the
	// bucket). The flip opens only a marked target, so a target shard restored to a point
	// before this (an older backup, whose copy may lack records) is never opened.
	if err := c.prepare(ctx, r, "ready"); err != nil {
		return err
	}
	return c.step(ctx, r, []State{ClosedA}, ReadyB, false,
		"drecords", i64(d.Records), "dtombs", i64(d.Tombstones), "dops", i64(d.Ops), "dsum", u64(d.Sum))
}

// drainSource finishes a snapshot that restarted while the source was closed, closes the
// source (the barrier) if it is not yet, and applies the source's log up to the barrier.
// It reports restarted when the copy restarted (the drive goes on from the journal record).
func (c *Coordinator) drainSource(ctx context.Context, r *run) (restarted bool, err error) {
	if r.Cursor != "done" {
		// A snapshot restarted while the source was closed; finish it first.
		if err := c.snapshot(ctx, r, ClosedA); err != nil {
			return false, err
		}
	}
	if r.Barrier == "" {
		if err := c.takeBarrier(ctx, r); err != nil {
			return false, err
		}
	}
	closed := routing.Ownership{Generation: r.SourceGen, State: routing.StateClosed}
	if _, restarted, err := c.applyLog(ctx, r, r.Barrier, closed); err != nil || restarted {
		return restarted, err
	}
	if shortOf(r.Barrier, r.Applied) {
		return false, fmt.Errorf("migrate: target applied %s, short of the barrier %s", r.Applied, r.Barrier)
	}
	return false, nil
}

// shortOf reports whether the log position applied is short of barrier, or either is not
// a log position. It is pure.
func shortOf(barrier, applied string) bool {
	if applied == barrier {
		return false
	}
	after, err := idAfter(barrier, applied)
	return err != nil || after
}

// carryMarks copies what the source's ownership record says about the unit's data to the
// target's import record: the version floor (routing's vfloor, so a record created on the
// target after a purged tombstone still starts above every version the unit ever had) and,
// for a bucket, the tenants marked as moved out of it, so the target refuses them too.
func (c *Coordinator) carryMarks(ctx context.Context, r *run) error {
	floor, err := bound.Do(ctx, func() ([]any, error) { return c.shards[r.Source].c.HMGet(ctx, c.srcKeys(r).Own, "vfloor").Result() })
	if err != nil {
		return fmt.Errorf("migrate: read source version floor: %w", err)
	}
	if f, _ := floor[0].(string); f != "" && f != "0" {
		if err := c.prepare(ctx, r, "floor", f); err != nil {
			return err
		}
	}
	if r.Unit.Kind != routing.KindBucket {
		return nil
	}
	_, moved, err := c.shards[r.Source].r.Ownership(ctx, r.Unit)
	if err != nil {
		return err
	}
	imp := routing.Ownership{Generation: r.ImportGen, State: routing.StateImporting}
	for tenant := range moved {
		_, err := c.shards[r.Target].r.MarkMovedFenced(ctx, r.Unit, tenant, true, imp, imp, r.epoch)
		var fe *routing.FencedError
		if errors.As(err, &fe) {
			return c.fenced(r, u64(fe.Fence), "target "+r.Target)
		}
		if err != nil {
			return fmt.Errorf("migrate: carry moved-out mark of %q: %w", tenant, err)
		}
	}
	return nil
}

// takeBarrier closes the source for the old generation with one script and journals the
// barrier (the source's final log position). A source that does not hold the unit open
// at SourceGen aborts the migration.
func (c *Coordinator) takeBarrier(ctx context.Context, r *run) error {
	open := routing.Ownership{Generation: r.SourceGen, State: routing.StateOpen}
	closed := routing.Ownership{Generation: r.SourceGen, State: routing.StateClosed}
	barrier, err := c.closeBarrier(ctx, r, c.shards[r.Source], open, closed)
	if errors.Is(err, ErrFenced) {
		return err
	}
	if errors.Is(err, routing.ErrOwnershipChanged) {
		return abortf(false, fmt.Errorf("%w: closing source: %v", ErrOwnershipChanged, err))
	}
	if err != nil {
		return fmt.Errorf("migrate: close source: %w", err)
	}
	return c.step(ctx, r, []State{ClosedA}, ClosedA, false, "barrier", barrier)
}

// flip (ReadyB): open the target at the new generation, then publish the new table by
// compare-and-set (generation = current + 1), retrying when another table was published
// in between. Only after the table is published does the migration end OwnedB.
func (c *Coordinator) flip(ctx context.Context, r *run) error {
	if r.folding() {
		return c.foldFlip(ctx, r)
	}
	if r.splitting() {
		return c.splitFlip(ctx, r)
	}
	b := c.shards[r.Target]
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := c.store.Load(ctx)
		if err != nil {
			return fmt.Errorf("migrate: flip: %w", err)
		}
		owner, err := flipOwner(t, r.Status)
		if err != nil {
			return err
		}
		own, err := c.flipTarget(ctx, r, b, t, owner)
		if err != nil {
			return err
		}
		again, err := c.publishFlip(ctx, r, t, owner)
		if err != nil {
			return err
		}
		if again {
			// Another table came first: re-check everything against it, the target's
			// record included.
			continue
		}
		return c.flipped(ctx, r, own.Generation)
	}
}

// flipTarget brings r's target b to what the flip against table t (which assigns the unit
// to owner) needs: it reads the target's record, plans the step with planFlip and applies
// it. It returns the target's record after the step. Every attempt of the flip re-reads
// the record, so the plan is made as for a target this drive has not opened yet.
func (c *Coordinator) flipTarget(ctx context.Context, r *run, b *shard, t *routing.Table, owner string) (routing.Ownership, error) {
	own, _, err := b.r.Ownership(ctx, r.Unit)
	if err != nil {
		return own, err
	}
	p, err := planFlip(t, owner, r.Status, own, false)
	if err != nil {
		return own, err
	}
	if err := c.applyFlip(ctx, r, b, p, own); err != nil {
		return own, err
	}
	if p.open {
		return p.to, nil
	}
	return own, nil
}

// flipOwner returns the shard table t assigns s's unit to, which must be its source or its
// target during the flip; it is pure.
func flipOwner(t *routing.Table, s Status) (string, error) {
	owner := s.tableOwner(t)
	if owner != s.Source && owner != s.Target {
		return "", fmt.Errorf("%w: table generation %d assigns %s to %q during the flip; the target stays as it is",
			ErrOwnershipChanged, t.Generation, s.Unit, owner)
	}
	return owner, nil
}

// flipPlan is what the flip does with the target's record next.
type flipPlan struct {
	open      bool              // open: move the target from importing to open at `to`.
	to        routing.Ownership // to is the target's open record, if open.
	checkOurs bool              // checkOurs: the target is open already; check it was opened for this migration.
}

// planFlip is flip's pure planning step: from table t (whose owner of the unit is owner),
// the target's record own and whether this call opened it, it decides what to do with the
// target's record, or refuses a record that is not this migration's.
func planFlip(t *routing.Table, owner string, s Status, own routing.Ownership, opened bool) (flipPlan, error) {
	imp := routing.Ownership{Generation: s.ImportGen, State: routing.StateImporting}
	switch {
	case own == imp:
		// Only this migration holds the target importing at ImportGen (prepare.lua), so
		// opening it is ours to do. The generation needs no journal entry: a resumed flip
		// reads it back from the target's record.
		gen := t.Generation + 1
		if owner == s.Target {
			gen = t.Generation
		}
		return flipPlan{open: true, to: routing.Ownership{Generation: gen, State: routing.StateOpen}}, nil
	case opened:
		// Opened by this call: the record is ours.
		return flipPlan{}, nil
	case own.State == routing.StateOpen && own.Generation <= t.Generation+1:
		// Opened by an earlier attempt (the journal says ReadyB): check it was ours.
		return flipPlan{checkOurs: true}, nil
	}
	return flipPlan{}, fmt.Errorf("%w: target %q holds %s as %v during the flip", ErrOwnershipChanged, s.Target, s.Unit, own)
}

// applyFlip carries out plan p on the target's record of the unit (own: as read).
func (c *Coordinator) applyFlip(ctx context.Context, r *run, b *shard, p flipPlan, own routing.Ownership) error {
	switch {
	case p.open:
		return c.openTarget(ctx, r, b, p.to)
	case p.checkOurs:
		return c.checkOpenedBy(ctx, r, b, own)
	}
	return nil
}

// openTarget moves the target's record of the unit from importing at ImportGen to `to`.
func (c *Coordinator) openTarget(ctx context.Context, r *run, b *shard, to routing.Ownership) error {
	err := c.openVerified(ctx, r, b, to)
	switch {
	case errors.Is(err, errNotVerified):
		// The verified copy was marked before ReadyB, and only a wipe removes the mark: the
		// target lost it (restored from an earlier backup). Opening it would lose
		// acknowledged records; the move aborts instead, reopening the source (no table
		// names the target yet).
		return abortf(true, fmt.Errorf("%w; the move stops before opening it", err))
	case errors.Is(err, ErrFenced):
		return err
	case err != nil:
		return fmt.Errorf("migrate: open target: %w", err)
	}
	return nil
}

// checkOpenedBy checks that the target's open record own of the unit names this migration.
func (c *Coordinator) checkOpenedBy(ctx context.Context, r *run, b *shard, own routing.Ownership) error {
	mig, err := bound.Do(ctx, func() ([]any, error) { return b.c.HMGet(ctx, routingfmt.Keys(c.keys.Tag(r.Unit)).Own, "mig").Result() })
	if err != nil {
		return fmt.Errorf("migrate: flip: %w", err)
	}
	if m, _ := mig[0].(string); m != r.ID {
		return fmt.Errorf("%w: target %q holds %s open (%v) for another migration %q", ErrOwnershipChanged, r.Target, r.Unit, own, m)
	}
	return nil
}

// publishFlip publishes the table after t with the unit on the target, if t still assigns
// it to the source (owner). It is published only while this drive still holds the
// migration in ReadyB, checked in the same script: a driver that was paused here and lost
// the migration cannot publish a table that reverts a later move. again is true when
// another table came first.
func (c *Coordinator) publishFlip(ctx context.Context, r *run, t *routing.Table, owner string) (again bool, err error) {
	if owner != r.Source {
		return false, nil
	}
	nt := t.Next()
	setOwner(nt, r.Unit, r.Target)
	return c.publishGuarded(ctx, r, nt)
}

// publishGuarded publishes table nt by compare-and-set (generation = current + 1) while
// r's drive still holds the migration in ReadyB, checked in the same script. again is true
// when another table came first.
func (c *Coordinator) publishGuarded(ctx context.Context, r *run, nt *routing.Table) (again bool, err error) {
	return c.published(r, c.store.PublishGuarded(ctx, nt, c.journalKey(r.ID), flipGuard(r)))
}

// flipGuard is the journal guard of r's publication: r's drive holds the migration (its
// epoch) in ReadyB.
func flipGuard(r *run) map[string]string {
	return map[string]string{"epoch": u64(r.epoch), "state": string(ReadyB)}
}

// published classifies err, the result of a guarded publication of r's table: again is
// true when another table came first; a lost guard is r's FencedError.
func (c *Coordinator) published(r *run, err error) (again bool, _ error) {
	switch {
	case errors.Is(err, routing.ErrGenerationConflict):
		return true, nil
	case errors.Is(err, routing.ErrFenced):
		c.stats.fenced.Add(1)
		return false, &FencedError{ID: r.ID, Epoch: r.epoch, Where: "table"}
	case err != nil:
		return false, fmt.Errorf("migrate: publish: %w", err)
	}
	return false, nil
}

// flipped ends the flip: it counts the migration done, records the write pause (from the
// barrier to now) and moves the journal to OwnedB with the flip's generation gen.
func (c *Coordinator) flipped(ctx context.Context, r *run, gen uint64) error {
	now := c.o.Clock()
	pause := now.Sub(r.ClosedAt)
	if r.ClosedAt.IsZero() {
		pause = 0
	}
	c.stats.done.Add(1)
	c.stats.lastPause.Store(int64(pause))
	return c.step(ctx, r, []State{ReadyB}, OwnedB, true,
		"flipgen", u64(gen), "flipped", ms(now), "pauseus", i64(pause.Microseconds()))
}

// setOwner assigns unit u to shard in t.
func setOwner(t *routing.Table, u routing.Unit, shard string) {
	switch u.Kind {
	case routing.KindBucket:
		t.SetBucket(u.Bucket, shard)
	case routing.KindTenant:
		t.SetOverride(u.Tenant, shard)
	case routing.KindSpread:
		s := slices.Clone(t.Spreads[u.Tenant])
		if int(u.Sub) < len(s) {
			s[u.Sub] = shard
			t.Spreads[u.Tenant] = s
		}
	}
}

// Cleanup deletes the source's closed copy of a finished migration's unit once the grace
// period (Options.Grace) after the flip has passed; until then it returns
// ErrGraceNotElapsed. The source's ownership record is kept (closed). If the unit was
// imported or owned by the source again since, nothing is deleted. Cleanup is idempotent.
func (c *Coordinator) Cleanup(ctx context.Context, id string) (Status, error) {
	s, err := c.load(ctx, id)
	if err != nil {
		return s, err
	}
	if s.State != OwnedB {
		return s, invalidf("migration %q is %s; only a finished (OwnedB) migration is cleaned up", id, s.State)
	}
	if s.Cleaned {
		return s, nil
	}
	if wait := s.Flipped.Add(c.o.Grace).Sub(c.o.Clock()); wait > 0 {
		return s, fmt.Errorf("%w: %v left for migration %q", ErrGraceNotElapsed, wait.Round(time.Millisecond), id)
	}
	if s.splitting() {
		return c.splitCleanup(ctx, s)
	}
	if s.From.Kind != 0 {
		// A carve-out deletes only while the bucket's mark is still its own (carve.lua).
		return c.carveCleanup(ctx, s)
	}
	return c.cleanupSource(ctx, s)
}

// cleanupSource is Cleanup for a moved unit: it takes a new epoch and deletes the source's
// closed copy with one script fenced by it, then marks the journal record cleaned.
func (c *Coordinator) cleanupSource(ctx context.Context, s Status) (Status, error) {
	id := s.ID
	// A new epoch first: a Cleanup paused past this point is refused by the source's
	// script and by the journal once a later caller (a driver of the unit, another
	// Cleanup) took a newer one.
	r, err := c.acquire(ctx, id, true, string(OwnedB))
	if err != nil {
		return r.Status, err
	}
	if r.epoch == 0 {
		return r.Status, invalidf("migration %q is %s; only a finished (OwnedB) migration is cleaned up", id, r.State)
	}
	defer c.release(ctx, id, r.epoch)
	k := routingfmt.Keys(c.keys.Tag(s.Unit))
	reply, err := cleanupScript.Run(ctx, c.shards[s.Source].c,
		[]string{k.Own, k.Records, k.Ops, k.OpExpiry, k.Tombstones, k.Log}, u64(s.SourceGen), u64(r.epoch)).StringSlice()
	if err != nil {
		return s, fmt.Errorf("migrate: cleanup of source %q: %w", s.Source, err)
	}
	if len(reply) == 2 && reply[0] == "fenced" {
		return s, c.fenced(r, reply[1], "source "+s.Source)
	}
	err = c.step(ctx, r, []State{OwnedB}, OwnedB, false, "cleaned", "1")
	return r.Status, err
}
