package migrate

import (
	"context"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/routing"
)

// claim (OwnedA): re-check that the source holds the unit open as recorded, claim the
// target for import (deleting whatever an earlier era left there), note the source's log
// position, then start the snapshot.
func (c *Coordinator) claim(ctx context.Context, r *run) error {
	if r.splitting() {
		return c.splitClaim(ctx, r)
	}
	p, err := c.probe(ctx, r, "0-0", "+", 0)
	if err != nil {
		return err
	}
	if err := c.sourceOpen(r, p); err != nil {
		return err
	}
	if err := c.prepare(ctx, r, "prepare"); err != nil {
		return err
	}
	// The snapshot starts after the position is known: every change after it is in the log.
	p, err = c.probe(ctx, r, "0-0", "+", 0)
	if err != nil {
		return err
	}
	if err := c.sourceOpen(r, p); err != nil {
		return err
	}
	return c.step(ctx, r, []State{OwnedA}, Copying, false,
		"snappos", p.last, "applied", p.last, "appliedn", u64(p.added), "cursor", "rec:0",
		"snapshots", strconv.Itoa(r.Snapshots+1))
}

// sourceOpen checks that the source still holds the unit open at the recorded generation.
func (c *Coordinator) sourceOpen(r *run, p probeResult) error {
	want := routing.Ownership{Generation: r.SourceGen, State: routing.StateOpen}
	if !r.sourceHolds(p, want, "+") {
		return abortf(false, fmt.Errorf("%w: source %q holds %s as %v, expected %v",
			ErrOwnershipChanged, r.Source, r.Unit, p.own, want))
	}
	return nil
}

// snapshot copies the source's records (tombstones included) and idempotency records to the
// target from the journal's cursor on, saving the cursor after every batch. The source may
// take writes meanwhile: the change log from SnapshotPos covers whatever the scan misses, and
// the target keeps the newest version of each record whatever the order of arrival.
func (c *Coordinator) snapshot(ctx context.Context, r *run, in State) error {
	if r.splitting() && r.lane == 0 {
		return c.splitSnapshot(ctx, r, in)
	}
	a := c.shards[r.Source]
	k := c.srcKeys(r)
	for r.Cursor != "done" {
		if err := ctx.Err(); err != nil {
			return err
		}
		phase, cur, err := parseCursor(r.Cursor)
		if err != nil {
			return err
		}
		key, zkey := k.Records, k.Tombstones
		if phase == "ops" {
			key, zkey = k.Ops, k.OpExpiry
		}
		kv, next, err := bound.Do2(ctx, func() ([]string, uint64, error) {
			return a.c.HScan(ctx, key, cur, r.scanMatch(phase), int64(c.o.BatchSize)).Result()
		})
		if err != nil {
			return fmt.Errorf("migrate: snapshot of source %q: %w", r.Source, err)
		}
		items, err := c.snapshotItems(ctx, a, phase, zkey, r.keepPairs(phase, kv))
		if err != nil {
			return err
		}
		w, _, err := c.apply(ctx, r, items)
		if err != nil {
			return err
		}
		c.stats.copied.Add(w)
		if err := c.step(ctx, r, []State{in}, in, false,
			"cursor", nextCursor(phase, next), "copied", i64(r.Copied+w)); err != nil {
			return err
		}
	}
	return nil
}

// nextCursor is the snapshot cursor after a page of phase ("records" or "ops") whose scan
// returned next: the phase's next page, the ops phase's first page after the records, or
// "done" after the ops. It is pure.
func nextCursor(phase string, next uint64) string {
	switch {
	case next != 0:
		return phase + ":" + u64(next)
	case phase == "ops":
		return "done"
	}
	return "ops:0"
}

func parseCursor(s string) (string, uint64, error) {
	phase, n, ok := strings.Cut(s, ":")
	cur, err := strconv.ParseUint(n, 10, 64)
	if !ok || err != nil || (phase != "rec" && phase != "ops") {
		return "", 0, fmt.Errorf("migrate: malformed snapshot cursor %q", s)
	}
	return phase, cur, nil
}

// snapshotItems turns one HSCAN page into items, with the expiries of tombstones and op
// records read from the source's expiry sets.
func (c *Coordinator) snapshotItems(ctx context.Context, a *shard, phase, zkey string, kv []string) ([]item, error) {
	items, need, idx := pageItems(phase, kv)
	if len(need) == 0 {
		return items, nil
	}
	scores, err := a.c.ZMScore(ctx, zkey, need...).Result()
	if err != nil {
		return nil, fmt.Errorf("migrate: snapshot expiries on source %q: %w", a.name, err)
	}
	return keepItems(items, idx, scores, c.opCutoff()), nil
}

// pageItems is the pure plan of a snapshot page kv (field, value pairs of phase "records"
// or "ops"): its items, and the fields (need) and item indexes (idx) of those whose expiry
// must be read: every op record and every tombstone.
func pageItems(phase string, kv []string) (items []item, need []string, idx []int) {
	items = make([]item, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		it := item{kind: 'r', field: kv[i], value: kv[i+1]}
		if phase == "ops" {
			it.kind = 'o'
		}
		if it.kind == 'o' || isTombstone(it.value) {
			need = append(need, it.field)
			idx = append(idx, len(items))
		}
		items = append(items, it)
	}
	return items, need, idx
}

// keepItems sets the expiry of items[idx[j]] to scores[j] and returns the items to copy
// (in place of items). It is pure.
func keepItems(items []item, idx []int, scores []float64, cutoff int64) []item {
	for j, i := range idx {
		if j < len(scores) && scores[j] > 0 {
			items[i].exp = int64(scores[j])
		} else {
			// Gone from the expiry set since the page was read: retention removed the
			// item (expired; not copied), or a later put superseded the tombstone (the
			// put is in the log).
			items[i].kind = 0
		}
	}
	// Idempotency records written before the retry window (cutoff) are left behind: no
	// retry can need them on the target (Options.OpRetryWindow).
	kept := items[:0]
	for _, it := range items {
		if it.kind != 0 && (it.kind != 'o' || it.exp > cutoff) {
			kept = append(kept, it)
		}
	}
	return kept
}

func isTombstone(rec string) bool {
	i := strings.IndexByte(rec, ':')
	return i > 0 && strings.HasPrefix(rec[i:], ":t:")
}

// catchUpStallRounds is how many catch-up rounds in a row may fail to bring the lag (or,
// after the verification pass, the set of records to re-read) below its smallest value so
// far before the source is closed anyway: writers that outpace the catch-up would
// otherwise keep the source open for MaxCatchUpRounds ever longer rounds.
const catchUpStallRounds = 2

// converging tracks whether a catch-up still shrinks what the barrier will have to do.
type converging struct {
	best  int // smallest value seen (-1: none yet)
	stall int // rounds in a row without a new smallest value
}

// stalled records one round's value and reports whether the catch-up has stopped
// converging.
func (g *converging) stalled(v int) bool {
	if g.best < 0 || v < g.best {
		g.best, g.stall = v, 0
		return false
	}
	g.stall++
	return g.stall >= catchUpStallRounds
}

// catchUp (CatchingUp): apply the source's change log to the target round after round,
// verify the copy once the lag is small, and close the source when the lag is at most
// CloseLag, when it stopped shrinking for catchUpStallRounds rounds (writers outpace the
// catch-up: the barrier applies the rest), or after MaxCatchUpRounds. A log trimmed past
// the applied position restarts the copy from a fresh snapshot.
func (c *Coordinator) catchUp(ctx context.Context, r *run) error {
	if r.splitting() {
		return c.splitCatchUp(ctx, r)
	}
	lag, dirty := converging{best: -1}, converging{best: -1}
	for round := 1; ; round++ {
		upto, err := c.roundEnd(ctx, r)
		if err != nil {
			return err
		}
		n, restarted, err := c.applyLog(ctx, r, upto, routing.Ownership{Generation: r.SourceGen, State: routing.StateOpen})
		if err != nil || restarted {
			return err
		}
		if n > c.o.CloseLag && round < c.o.MaxCatchUpRounds && !lag.stalled(n) {
			continue
		}
		if r.ver == nil || r.ver.id != r.ID {
			// Verify while the source still takes writes; what changes after the pass
			// started is re-checked under the barrier.
			v, err := c.verifyPass(ctx, r)
			if err != nil {
				return err
			}
			r.ver = v
			continue
		}
		if len(r.ver.dirty) > c.o.CloseLag && round < c.o.MaxCatchUpRounds && !dirty.stalled(len(r.ver.dirty)) {
			// Shrink what the barrier will have to re-read while writes still flow.
			if err := c.refine(ctx, r, r.ver); err != nil {
				return err
			}
			continue
		}
		return c.step(ctx, r, []State{CatchingUp}, ClosedA, false, "closedat", ms(c.o.Clock()))
	}
}

// applyLog applies the source's change log after r.Applied, up to `upto` (the round's end
// or the barrier), to the target, journaling the position after every batch. It returns the number
// of entries applied. When the source's log lost entries the target has not applied (trimmed
// past r.Applied), it resets the target and restarts the copy from a fresh snapshot
// (restarted). The source's ownership record must be `want` (open during catch-up, closed at
// the barrier, with its log ending there); otherwise the migration aborts.
func (c *Coordinator) applyLog(ctx context.Context, r *run, upto string, want routing.Ownership) (n int, restarted bool, err error) {
	for {
		if err := ctx.Err(); err != nil {
			return n, false, err
		}
		p, err := c.probe(ctx, r, r.Applied, upto, c.o.BatchSize)
		if err != nil {
			return n, false, err
		}
		if err := r.checkSource(p, want, upto); err != nil {
			return n, false, err
		}
		lost, err := p.lost(r.Applied, r.appliedN)
		if err != nil {
			return n, false, err
		}
		if lost {
			return n, true, c.restartSnapshot(ctx, r, p)
		}
		if len(p.entries) == 0 {
			return n, false, nil
		}
		kept, err := c.applyEntries(ctx, r, p.entries)
		n += kept
		if err != nil {
			return n, false, err
		}
		if len(p.entries) < c.o.BatchSize {
			return n, false, nil
		}
	}
}

// applyEntries applies one batch of log entries (at least one) to r's target and records
// the last one as applied. It returns how many entries logBatch kept; it counts them
// only once the batch is applied.
func (c *Coordinator) applyEntries(ctx context.Context, r *run, entries []redis.XMessage) (kept int, err error) {
	items, kept, err := c.logBatch(r, entries)
	if err != nil {
		return 0, err
	}
	if _, _, err := c.apply(ctx, r, items); err != nil {
		return 0, err
	}
	c.stats.logApplied.Add(int64(len(entries)))
	last := entries[len(entries)-1].ID
	return kept, c.step(ctx, r, []State{r.State}, r.State, false,
		"applied", last, "appliedn", u64(r.appliedN+uint64(len(entries))),
		"logapplied", i64(r.LogApplied+int64(len(entries))))
}

// checkSource aborts the migration (without reopening the source) unless the source's
// probed record p is `want` with its log at upto (open during catch-up: its log goes on
// past the round's end). It is pure.
func (r *run) checkSource(p probeResult, want routing.Ownership, upto string) error {
	logEnd := upto
	if want.State == routing.StateOpen {
		// Catching up: the open source's log goes on past the round's end.
		logEnd = "+"
	}
	if !r.sourceHolds(p, want, logEnd) {
		return abortf(false, fmt.Errorf("%w: source %q holds %s as %v with log at %s, expected %v (log at %s)",
			ErrOwnershipChanged, r.Source, r.Unit, p.own, p.last, want, upto))
	}
	return nil
}

// logBatch turns one batch of change-log entries into the items to apply to the target
// and the number of entries kept (a carve-out skips the other tenants' writes in its
// bucket), and touches the verifier with every kept entry. An entry that does not parse
// aborts the migration (reopening the source).
func (c *Coordinator) logBatch(r *run, entries []redis.XMessage) (items []item, kept int, err error) {
	items = make([]item, 0, 2*len(entries))
	for _, m := range entries {
		e, err := routingfmt.ParseLogEntry(m)
		if err != nil {
			return nil, 0, abortf(true, fmt.Errorf("%w: %v", ErrConflict, err))
		}
		if !r.keep(e.Field) {
			// Another tenant's write in the bucket a carve-out leaves.
			continue
		}
		kept++
		items = append(items, c.logItems(e)...)
		if r.ver != nil {
			r.ver.touch(e)
		}
	}
	return items, kept, nil
}

// logItems turns one change-log entry into the items it carries: the record after the
// write (put, del) and the idempotency record (always).
func (c *Coordinator) logItems(e routingfmt.LogEntry) []item {
	out := make([]item, 0, 2)
	if e.Kind == "put" || e.Kind == "del" {
		it := item{kind: 'r', field: e.Field, value: routingfmt.EncodeRecord(e.Record)}
		if e.Record.Deleted {
			it.exp = e.TombstoneExpiry
			if it.exp <= 0 {
				// An entry written before the log carried the tombstone's expiry: derive it
				// from the entry's time and the configured retention.
				at := c.o.Clock()
				if id, err := parseID(e.ID); err == nil {
					at = time.UnixMilli(int64(id.ms))
				}
				it.exp = at.Add(c.o.TombstoneRetention).UnixMilli()
			}
		}
		out = append(out, it)
	}
	return append(out, item{kind: 'o', field: e.OpID, value: routingfmt.EncodeOpRecord(e.Op), exp: e.OpExpiry})
}

// restartSnapshot resets the target's copy and starts a fresh snapshot from the probed position,
// because the source's log no longer holds entries the target needs.
func (c *Coordinator) restartSnapshot(ctx context.Context, r *run, p probeResult) error {
	if r.splitting() {
		return abortf(false, fmt.Errorf("%w: the change log of %s on %q lost entries after %s before the split applied them; start the split again",
			ErrConflict, r.Unit, r.Source, r.Applied))
	}
	if err := c.prepare(ctx, r, "reset"); err != nil {
		return err
	}
	c.stats.restarts.Add(1)
	r.ver = nil
	to := Copying
	if r.State == ClosedA {
		// The source is closed: the snapshot is exact; copy it in place.
		to = ClosedA
	}
	if err := c.step(ctx, r, []State{r.State}, to, false, "snappos", p.last, "applied", p.last,
		"appliedn", u64(p.added), "cursor", "rec:0", "snapshots", strconv.Itoa(r.Snapshots+1)); err != nil {
		return err
	}
	if to == ClosedA {
		return c.snapshot(ctx, r, ClosedA)
	}
	return nil
}

// opCutoff is the expiry (unix ms) at or before which an idempotency record was written
// before the retry window and is not moved: now + OpRetention - OpRetryWindow (now, with
// the default window).
func (c *Coordinator) opCutoff() int64 {
	return c.o.Clock().Add(c.o.OpRetention - c.o.OpRetryWindow).UnixMilli()
}
