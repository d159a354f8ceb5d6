package migrate

import (
	"context"
	"errors"
	"fmt"
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
	if r.Cursor != "done" {
		// A snapshot restarted while the source was closed; finish it first.
		if err := c.snapshot(ctx, r, ClosedA); err != nil {
			return err
		}
	}
	a := c.shards[r.Source]
	if r.Barrier == "" {
		open := routing.Ownership{Generation: r.SourceGen, State: routing.StateOpen}
		closed := routing.Ownership{Generation: r.SourceGen, State: routing.StateClosed}
		barrier, err := c.closeBarrier(ctx, r, a, open, closed)
		if errors.Is(err, ErrFenced) {
			return err
		}
		if errors.Is(err, routing.ErrOwnershipChanged) {
			return abortf(false, fmt.Errorf("%w: closing source: %v", ErrOwnershipChanged, err))
		}
		if err != nil {
			return fmt.Errorf("migrate: close source: %w", err)
		}
		if err := c.step(ctx, r, []State{ClosedA}, ClosedA, false, "barrier", barrier); err != nil {
			return err
		}
	}
	closed := routing.Ownership{Generation: r.SourceGen, State: routing.StateClosed}
	if _, restarted, err := c.applyLog(ctx, r, r.Barrier, closed); err != nil || restarted {
		return err
	}
	if r.Applied != r.Barrier {
		if after, err := idAfter(r.Barrier, r.Applied); err != nil || after {
			return fmt.Errorf("migrate: target applied %s, short of the barrier %s", r.Applied, r.Barrier)
		}
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
	return c.step(ctx, r, []State{ClosedA}, ReadyB, false,
		"drecords", i64(d.Records), "dtombs", i64(d.Tombstones), "dops", i64(d.Ops), "dsum", u64(d.Sum))
}

// carryMarks copies what the source's ownership record says about the unit's data to the
// target's import record: the version floor (routing's vfloor, so a record created on the
// target after a purged tombstone still starts above every version the unit ever had) and,
// for a bucket, the tenants marked as moved out of it, so the target refuses them too.
func (c *Coordinator) carryMarks(ctx context.Context, r *run) error {
	floor, err := c.shards[r.Source].c.HMGet(ctx, c.srcKeys(r).Own, "vfloor").Result()
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
	var own routing.Ownership
	opened := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := c.store.Load(ctx)
		if err != nil {
			return fmt.Errorf("migrate: flip: %w", err)
		}
		owner := r.tableOwner(t)
		if owner != r.Source && owner != r.Target {
			return fmt.Errorf("%w: table generation %d assigns %s to %q during the flip; the target stays as it is",
				ErrOwnershipChanged, t.Generation, r.Unit, owner)
		}
		if !opened {
			own, _, err = b.r.Ownership(ctx, r.Unit)
			if err != nil {
				return err
			}
		}
		imp := routing.Ownership{Generation: r.ImportGen, State: routing.StateImporting}
		switch {
		case own == imp:
			// Only this migration holds the target importing at ImportGen (prepare.lua), so
			// opening it is ours to do. The generation needs no journal entry: a resumed flip
			// reads it back from the target's record.
			gen := t.Generation + 1
			if owner == r.Target {
				gen = t.Generation
			}
			to := routing.Ownership{Generation: gen, State: routing.StateOpen}
			if _, err := c.transition(ctx, r, b, imp, to); err != nil {
				if errors.Is(err, ErrFenced) {
					return err
				}
				return fmt.Errorf("migrate: open target: %w", err)
			}
			own, opened = to, true
		case opened:
			// Opened by this call: the record is ours.
		case own.State == routing.StateOpen && own.Generation <= t.Generation+1:
			// Opened by an earlier attempt (the journal says ReadyB): check it was ours.
			mig, err := b.c.HMGet(ctx, c.keys.Unit(r.Unit).Own, "mig").Result()
			if err != nil {
				return fmt.Errorf("migrate: flip: %w", err)
			}
			if m, _ := mig[0].(string); m != r.ID {
				return fmt.Errorf("%w: target %q holds %s open (%v) for another migration %q", ErrOwnershipChanged, r.Target, r.Unit, own, m)
			}
		default:
			return fmt.Errorf("%w: target %q holds %s as %v during the flip", ErrOwnershipChanged, r.Target, r.Unit, own)
		}
		if owner == r.Source {
			nt := t.Next()
			setOwner(nt, r.Unit, r.Target)
			// Published only while this drive still holds the migration in ReadyB, checked
			// in the same script: a driver that was paused here and lost the migration
			// cannot publish a table that reverts a later move.
			err := c.store.PublishGuarded(ctx, nt, c.journalKey(r.ID),
				map[string]string{"epoch": u64(r.epoch), "state": string(ReadyB)})
			switch {
			case errors.Is(err, routing.ErrGenerationConflict):
				// Another table came first: re-check everything against it, the
				// target's record included.
				opened = false
				continue
			case errors.Is(err, routing.ErrFenced):
				c.stats.fenced.Add(1)
				return &FencedError{ID: r.ID, Epoch: r.epoch, Where: "table"}
			case err != nil:
				return fmt.Errorf("migrate: publish: %w", err)
			}
		}
		now := c.o.Clock()
		pause := now.Sub(r.ClosedAt)
		if r.ClosedAt.IsZero() {
			pause = 0
		}
		c.stats.done.Add(1)
		c.stats.lastPause.Store(int64(pause))
		return c.step(ctx, r, []State{ReadyB}, OwnedB, true,
			"flipgen", u64(own.Generation), "flipped", ms(now), "pauseus", i64(pause.Microseconds()))
	}
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
	k := c.keys.Unit(s.Unit)
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
