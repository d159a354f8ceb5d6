package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/routing"
)

// SplitSpec asks for a split: an overridden tenant becomes a spread of len(Targets)
// sub-buckets, or a spread tenant's width changes to len(Targets).
type SplitSpec struct {
	// ID names the migration; it must be unique. Default: a fresh random ID.
	ID string
	// Tenant is the tenant to split. It must be valid UTF-8, and the current table must place
	// it by an override or by a spread.
	Tenant string
	// Targets names the shard of each sub-bucket of the new spread: sub-bucket i lives on
	// Targets[i]. Its length is the new width, 2..routing.MaxSpread, and differs from the
	// current width of a spread tenant; one target merges a spread tenant back into its
	// override unit on that shard (see [Coordinator.Merge]). Every shard must be known to the Coordinator and
	// named in the table. Several sub-buckets may share a shard (their units have different
	// names). For a re-split, sub-bucket i may not stay on the shard that holds the old
	// sub-bucket i (see [Coordinator.Split]).
	Targets []string
}

// lane is one source of a split: the tenant's override unit, or one sub-bucket of its old
// spread, with the copy's progress from it (the same fields a migration keeps for its one
// source).
type lane struct {
	unit      routing.Unit
	shard     string
	gen       uint64 // the generation of the source's open ownership record
	snapPos   string
	cursor    string
	applied   string
	appliedN  uint64
	barrier   string
	snapshots int
	copied    int64
	logApply  int64
}

// Split turns a tenant into a spread of len(spec.Targets) sub-buckets, durably:
// [Coordinator.StartSplit] then [Coordinator.Resume]. Every record of the tenant (with its
// version; tombstones included) and every idempotency record that names its record field go
// to the sub-bucket routing.Router routes the record's key to under the new width
// (xxhash64(key) % width), on the shard spec.Targets names for it.
//
//   - From an override (1 -> K): the source is the tenant's override unit; the table that
//     ends the split replaces the override by the spread.
//   - A re-split (K -> K', e.g. 4 -> 8 or 8 -> 4): the sources are the K sub-buckets of the
//     old spread. Every record moves to its sub-bucket under the new width, also one whose
//     sub-bucket index and shard would not change: the old sub-bucket is closed as a whole
//     at the barrier and the new one, a unit of the same name, is filled from empty. So new
//     sub-bucket i may not be placed on the shard of old sub-bucket i (the two would be the
//     same keys on that shard): such a spec is refused with ErrInvalid; put that sub-bucket
//     on another shard, or re-split in two steps.
//   - A tenant in a shared hash bucket is not split directly: carve it out first
//     ([Coordinator.Carve]), then split its override. Such a spec fails with ErrInvalid
//     saying so.
//
// It is a durable migration like [Coordinator.Migrate], journaled, resumable from any
// state by a new process, cancellable until the barrier, fenced by one driver epoch (from
// the tenant unit's counter) on the journal, every source and every target, with the same
// rules: the copy runs while the tenant keeps writing (a snapshot of every source, then
// each source's change log), the copy is verified by content (record by record, the
// digests of both sides, a mismatch aborts with a [*VerifyError] naming the first
// differing keys), then the barrier closes every source (writes of this tenant only wait
// from here; other tenants and units never do), each source's log is applied up to its
// barrier, the items that changed since the verification are compared again, every new
// sub-bucket is opened at the new table generation and one table with the new spread is
// published. A router on the old table is refused by the closed sources (and, after a
// re-split, a unit of a reused name is open only at the new generation, which refuses it
// too), learns the new table and retries with the same op ID in the new sub-bucket, where
// an operation applied before the barrier replays its first result.
//
// The migration holds the migration locks of the tenant's override unit and of every
// sub-bucket of the old and the new spread: no move of one of them meanwhile. A Cancel or
// an abort deletes the copies from every target and reopens every source this split
// closed: the tenant stays where it was. A source's change log that loses entries the
// split has not applied yet (trimmed) aborts the split: start it again.
// [Coordinator.Cleanup] deletes the closed sources' copies after the grace period; until
// then they stay, closed to routed reads and writes and readable with plain Redis commands
// (the rollback window: going back is a new migration, a re-split or a fold of a spread is
// not a flip back once the new sub-bucket took a write). Idempotency records written before
// op records named their record field cannot be routed to a sub-bucket and do not travel.
func (c *Coordinator) Split(ctx context.Context, spec SplitSpec) (Status, error) {
	s, err := c.StartSplit(ctx, spec)
	if err != nil {
		return s, err
	}
	return c.Resume(ctx, s.ID)
}

// StartSplit checks spec against the current table and the ownership records of every
// source and target, writes the split's journal record (state OwnedA) and takes its
// migration locks in one step, like [Coordinator.Start] does for a unit. It changes nothing
// on the shards. The returned Status has Unit = the tenant's override unit, Source = the
// override's shard (a split from an override), SplitFrom = the old spread (a re-split) and
// SplitTo = spec.Targets. Bad input fails with ErrInvalid naming the problem, and changes
// nothing.
func (c *Coordinator) StartSplit(ctx context.Context, spec SplitSpec) (Status, error) {
	u, id, err := checkSplitSpec(spec, c.o.NewID)
	if err != nil {
		return Status{}, err
	}
	spec.ID = id
	if prev, err := c.load(ctx, spec.ID); err == nil {
		if prev.splitting() && prev.Unit == u && slices.Equal(prev.SplitTo, spec.Targets) {
			return prev, nil
		}
		return Status{}, invalidf("migration ID %q is already used for %s", spec.ID, prev)
	} else if !errors.Is(err, ErrNotFound) {
		return Status{}, err
	}
	t, err := c.store.Load(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("migrate: start split: %w", err)
	}
	lanes, err := planSplit(t, spec, c.hasShard)
	if err != nil {
		return Status{}, err
	}
	if err := c.busy(ctx, Status{ID: id, Unit: u, SplitTo: spec.Targets, SplitFrom: t.Spreads[spec.Tenant]}); err != nil {
		return Status{}, err
	}
	if err := c.splitSourceGens(ctx, t, lanes); err != nil {
		return Status{}, err
	}
	imp, err := c.splitImportGen(ctx, t, spec)
	if err != nil {
		return Status{}, err
	}
	s := newSplitStatus(spec, u, t, lanes, imp, c.o.Clock())
	if err := c.create(ctx, s); err != nil {
		return Status{}, err
	}
	c.stats.started.Add(1)
	return c.load(ctx, s.ID)
}

// checkSplitSpec is the check StartSplit makes before it reads anything: the tenant and
// the migration ID as checkTenantSpec checks them (newID fills an empty ID), and 1 (a
// merge) to routing.MaxSpread targets. It returns the tenant's unit and the ID; it is pure apart
// from newID.
func checkSplitSpec(spec SplitSpec, newID func() string) (routing.Unit, string, error) {
	u, id, err := checkTenantSpec(spec.Tenant, spec.ID, newID)
	if err != nil {
		return routing.Unit{}, "", err
	}
	if n := len(spec.Targets); n < 1 || n > routing.MaxSpread {
		return routing.Unit{}, "", invalidf("Targets must name 1..%d shards (one per sub-bucket of the new spread; one for a merge), got %d", routing.MaxSpread, n)
	}
	return u, id, nil
}

// planSplit is StartSplit's pure planning step: it checks spec's targets against table t
// and the shards the coordinator has clients for (has), and returns the split's sources
// (see splitLanes), their generations not read yet.
func planSplit(t *routing.Table, spec SplitSpec, has func(shard string) bool) ([]lane, error) {
	for i, name := range spec.Targets {
		switch {
		case !has(name):
			return nil, invalidf("Targets[%d]: unknown shard %q", i, name)
		case !containsShard(t, name):
			return nil, invalidf("Targets[%d]: shard %q is not named in the table (generation %d)", i, name, t.Generation)
		}
	}
	return splitLanes(t, spec, has)
}

// splitSourceGens reads the ownership of every source of lanes: each must be open at a
// generation no newer than table t's, which it notes on its lane.
func (c *Coordinator) splitSourceGens(ctx context.Context, t *routing.Table, lanes []lane) error {
	for i := range lanes {
		own, _, err := c.shards[lanes[i].shard].r.Ownership(ctx, lanes[i].unit)
		if err != nil {
			return fmt.Errorf("migrate: start split: %w", err)
		}
		if own.State != routing.StateOpen || own.Generation > t.Generation {
			return fmt.Errorf("%w: source %q holds %s as %v, table generation %d",
				ErrOwnershipChanged, lanes[i].shard, lanes[i].unit, own, t.Generation)
		}
		lanes[i].gen = own.Generation
	}
	return nil
}

// splitImportGen reads the ownership of every target sub-bucket of spec: none may be
// open, nor claimed for import by another migration. It returns the import generation:
// the highest of table t's next one and the targets' generations.
func (c *Coordinator) splitImportGen(ctx context.Context, t *routing.Table, spec SplitSpec) (uint64, error) {
	imp := t.Generation + 1
	for j, name := range spec.Targets {
		tu := targetUnit(spec.Tenant, len(spec.Targets), j)
		tgt, _, err := c.shards[name].r.Ownership(ctx, tu)
		if err != nil {
			return 0, fmt.Errorf("migrate: start split: %w", err)
		}
		if tgt.State == routing.StateOpen {
			return 0, fmt.Errorf("%w: target %q holds %s open (%v)", ErrOwnershipChanged, name, tu, tgt)
		}
		if tgt.State == routing.StateImporting && !c.claimedBy(ctx, name, tu, spec.ID) {
			return 0, fmt.Errorf("%w: target %q holds an import claim on %s (%v); see Claims, and ClearClaim if its migration is finished",
				ErrOwnershipChanged, name, tu, tgt)
		}
		imp = max(imp, tgt.Generation)
	}
	return imp, nil
}

// newSplitStatus is the journal record a split starts with (state OwnedA), created at
// now: from the old spread of table t (a re-split) or from the override on lanes[0]'s
// shard. It is pure.
func newSplitStatus(spec SplitSpec, u routing.Unit, t *routing.Table, lanes []lane, imp uint64, now time.Time) Status {
	s := Status{ID: spec.ID, Unit: u, State: OwnedA, ImportGen: imp, Created: now,
		SplitTo: slices.Clone(spec.Targets), lanes: lanes}
	if old := t.Spreads[spec.Tenant]; old != nil {
		s.SplitFrom = slices.Clone(old)
	} else {
		s.Source, s.SourceGen = lanes[0].shard, lanes[0].gen
	}
	return s
}

// splitLanes checks spec's tenant against table t and the shards the coordinator has
// clients for (has), and returns the split's sources. It is pure.
func splitLanes(t *routing.Table, spec SplitSpec, has func(shard string) bool) ([]lane, error) {
	if o := t.Overrides[spec.Tenant]; o != "" {
		if len(spec.Targets) == 1 {
			return nil, invalidf("tenant %q is overridden onto %q, one unit already: a split needs 2 or more Targets (move the unit with Migrate)",
				spec.Tenant, o)
		}
		if !has(o) {
			return nil, invalidf("no client for source shard %q", o)
		}
		return []lane{{unit: routing.TenantUnit(spec.Tenant), shard: o}}, nil
	}
	old, ok := t.Spreads[spec.Tenant]
	if !ok {
		return nil, invalidf("tenant %q is neither overridden nor spread (table generation %d): it lives in its hash bucket; carve it out first (Carve), then split its override",
			spec.Tenant, t.Generation)
	}
	if len(spec.Targets) == 1 {
		// A merge: every sub-bucket returns into the override unit on Targets[0], a unit of
		// another name than any sub-bucket's, so it may be on any shard.
		return spreadLanes(spec.Tenant, old, nil, has)
	}
	if len(old) == len(spec.Targets) {
		return nil, invalidf("tenant %q is spread over %d sub-buckets already: a re-split must change the width (move one sub-bucket with Migrate)",
			spec.Tenant, len(old))
	}
	return spreadLanes(spec.Tenant, old, spec.Targets, has)
}

// spreadLanes returns the lanes of a re-split or a merge of tenant's spread old (one per
// old sub-bucket) into the new sub-buckets on targets (nil for a merge). It is pure.
func spreadLanes(tenant string, old, targets []string, has func(shard string) bool) ([]lane, error) {
	lanes := make([]lane, len(old))
	for i, name := range old {
		if i < len(targets) && targets[i] == name {
			return nil, invalidf("Targets[%d] is %q, the shard of the old sub-bucket %d: a re-split fills every new sub-bucket from empty, so sub-bucket %d must move to another shard",
				i, name, i, i)
		}
		if !has(name) {
			return nil, invalidf("no client for source shard %q (sub-bucket %d)", name, i)
		}
		lanes[i] = lane{unit: routing.SpreadUnit(tenant, uint32(i)), shard: name}
	}
	return lanes, nil
}

// targetUnit is the unit of target j of a split of tenant to width targets: sub-bucket j of
// the new spread, or the tenant's override unit for a merge (width 1).
func targetUnit(tenant string, targets, j int) routing.Unit {
	if targets == 1 {
		return routing.TenantUnit(tenant)
	}
	return routing.SpreadUnit(tenant, uint32(j))
}

// merging reports whether s is a merge: a split of a spread back into one override unit.
func (s Status) merging() bool { return len(s.SplitTo) == 1 }

// splitting reports whether s is a split.
func (s Status) splitting() bool { return len(s.SplitTo) > 0 }

// splitSources names the shards of a split's sources.
func (s Status) splitSources() []string {
	if s.SplitFrom != nil {
		return s.SplitFrom
	}
	return []string{s.Source}
}

// splitLocks are the units whose locks a split holds besides its tenant unit's: every
// sub-bucket of the old and of the new spread.
func (s Status) splitLocks() []routing.Unit {
	if !s.splitting() {
		return nil
	}
	var out []routing.Unit
	for i := range max(len(s.SplitFrom), len(s.SplitTo)) {
		out = append(out, routing.SpreadUnit(s.Unit.Tenant, uint32(i)))
	}
	return out
}

// laneKey is the journal field of lane i's value f.
func laneKey(i int, f string) string { return "l" + strconv.Itoa(i) + ":" + f }

// splitFields returns the journal fields of a split's immutable part (none for another
// migration).
func (s Status) splitFields() []any {
	if !s.splitting() {
		return nil
	}
	to, _ := json.Marshal(s.SplitTo)
	out := []any{"splitto", string(to)}
	if s.SplitFrom != nil {
		from, _ := json.Marshal(s.SplitFrom)
		out = append(out, "splitfrom", string(from))
	}
	for i, l := range s.lanes {
		out = append(out, laneKey(i, "srcgen"), u64(l.gen))
	}
	return out
}

// parseSplit reads a split's fields from journal record m into s.
func (s *Status) parseSplit(m map[string]string) error {
	if m["splitto"] == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(m["splitto"]), &s.SplitTo); err != nil || len(s.SplitTo) == 0 {
		return fmt.Errorf("splitto")
	}
	if m["splitfrom"] != "" {
		if err := json.Unmarshal([]byte(m["splitfrom"]), &s.SplitFrom); err != nil || len(s.SplitFrom) == 0 {
			return fmt.Errorf("splitfrom")
		}
	}
	n := len(s.SplitFrom)
	if n == 0 {
		n = 1
	}
	s.lanes = make([]lane, n)
	for i := range s.lanes {
		l := &s.lanes[i]
		if s.SplitFrom != nil {
			l.unit, l.shard = routing.SpreadUnit(s.Unit.Tenant, uint32(i)), s.SplitFrom[i]
		} else {
			l.unit, l.shard = s.Unit, s.Source
		}
		if err := l.parse(m, i); err != nil {
			return err
		}
		// The migration's counts are the sums of its lanes'.
		s.Copied += l.copied
		s.LogApplied += l.logApply
	}
	return nil
}

// parse reads lane i's progress from journal record m into l; an error names the field
// that is missing (the lane's source generation).
func (l *lane) parse(m map[string]string, i int) error {
	num := func(f string) uint64 {
		n, _ := strconv.ParseUint(m[laneKey(i, f)], 10, 64)
		return n
	}
	l.gen, l.appliedN, l.snapshots = num("srcgen"), num("appliedn"), int(num("snapshots"))
	l.copied, l.logApply = int64(num("copied")), int64(num("logapplied"))
	l.snapPos, l.cursor = m[laneKey(i, "snappos")], m[laneKey(i, "cursor")]
	l.applied, l.barrier = m[laneKey(i, "applied")], m[laneKey(i, "barrier")]
	if l.gen == 0 {
		return fmt.Errorf("%s", laneKey(i, "srcgen"))
	}
	return nil
}

// laneView is s as seen by the drive of its lane i: the lane's source unit, shard and
// progress in place of the migration's.
func (s Status) laneView(i int) Status {
	v := s
	if i < 0 || i >= len(s.lanes) {
		return v
	}
	l := s.lanes[i]
	v.Unit, v.Source, v.SourceGen = l.unit, l.shard, l.gen
	v.SnapshotPos, v.Cursor, v.Applied, v.appliedN, v.Barrier = l.snapPos, l.cursor, l.applied, l.appliedN, l.barrier
	v.Snapshots, v.Copied, v.LogApplied = l.snapshots, l.copied, l.logApply
	return v
}

// laneFields turns the fields a step of lane run r writes into the lane's journal fields
// (unchanged for another run).
func (r *run) laneFields(kv []string) []string {
	if r.lane == 0 {
		return kv
	}
	out := slices.Clone(kv)
	for i := 0; i < len(out); i += 2 {
		out[i] = laneKey(r.lane-1, out[i])
	}
	return out
}

// view is the journal record ns as run r sees it.
func (r *run) view(ns Status) Status {
	if r.lane == 0 {
		return ns
	}
	return ns.laneView(r.lane - 1)
}

// laneRun returns the run of r's lane i, driven with r's epoch.
func (r *run) laneRun(i int) *run {
	return &run{Status: r.Status.laneView(i), epoch: r.epoch, lane: i + 1, ver: r.sver}
}

// targetRun returns a run of sub-bucket j of r's new spread, as a migration of that unit
// alone onto its shard (what prepare and apply act on), driven with r's epoch.
func (r *run) targetRun(j int) *run {
	s := r.Status
	s.Unit, s.Target = targetUnit(r.Unit.Tenant, len(r.SplitTo), j), r.SplitTo[j]
	s.SplitTo, s.SplitFrom, s.lanes = nil, nil, nil
	return &run{Status: s, epoch: r.epoch}
}

// refresh reloads r's journal record.
func (c *Coordinator) refresh(ctx context.Context, r *run) error {
	s, err := c.load(ctx, r.ID)
	if err != nil {
		return err
	}
	if r.epoch > 0 && s.Epoch != r.epoch {
		c.stats.fenced.Add(1)
		return &FencedError{ID: r.ID, Epoch: r.epoch, Current: s.Epoch, Where: "journal", State: s.State}
	}
	r.Status = s
	return nil
}

// splitSub returns the sub-bucket of a width-w spread that record field f of tenant goes
// to, or false when f is not the tenant's.
func splitSub(tenant, f string, w int) (int, bool) {
	t, key, ok := routingfmt.SplitRecordField(f)
	if !ok || t != tenant {
		return 0, false
	}
	return int(hashing.Bucket(key, uint64(w))), true
}

// itemSub returns the sub-bucket of a width-w spread an item goes to: its record field's,
// for an idempotency record the field it names; false when it names none.
func itemSub(tenant string, kind byte, field, value string, w int) (int, bool) {
	if kind == 'o' {
		op, err := routingfmt.DecodeOpRecord(value)
		if err != nil {
			return 0, false
		}
		field = op.Field
	}
	return splitSub(tenant, field, w)
}

// splitClaim (OwnedA) for a split: check every source is open as recorded, claim every
// target for import, note each source's log position, then start the snapshots.
func (c *Coordinator) splitClaim(ctx context.Context, r *run) error {
	for i := range r.lanes {
		lr := r.laneRun(i)
		p, err := c.probe(ctx, lr, "0-0", "+", 0)
		if err != nil {
			return err
		}
		if err := c.sourceOpen(lr, p); err != nil {
			return err
		}
	}
	for j := range r.SplitTo {
		if err := c.prepare(ctx, r.targetRun(j), "prepare"); err != nil {
			return err
		}
	}
	var kv []string
	for i := range r.lanes {
		lr := r.laneRun(i)
		p, err := c.probe(ctx, lr, "0-0", "+", 0)
		if err != nil {
			return err
		}
		if err := c.sourceOpen(lr, p); err != nil {
			return err
		}
		kv = append(kv, laneKey(i, "snappos"), p.last, laneKey(i, "applied"), p.last,
			laneKey(i, "appliedn"), u64(p.added), laneKey(i, "cursor"), "rec:0", laneKey(i, "snapshots"), "1")
	}
	return c.step(ctx, r, []State{OwnedA}, Copying, false, append(kv, "cursor", "rec:0", "snapshots", "1")...)
}

// splitSnapshot copies every source's snapshot, lane by lane.
func (c *Coordinator) splitSnapshot(ctx context.Context, r *run, in State) error {
	for i := range r.lanes {
		if lr := r.laneRun(i); lr.Cursor != "done" {
			if err := c.snapshot(ctx, lr, in); err != nil {
				return err
			}
		}
	}
	return c.refresh(ctx, r)
}

// splitApply writes items read from one source to the sub-buckets of the new spread they
// go to, one apply per sub-bucket. An idempotency record that names no record field of the
// tenant cannot be placed and is skipped.
func (c *Coordinator) splitApply(ctx context.Context, r *run, items []item) (written, skipped int64, err error) {
	w := len(r.SplitTo)
	groups := make(map[int][]item)
	for _, it := range items {
		sub, ok := itemSub(r.Unit.Tenant, it.kind, it.field, it.value, w)
		if !ok {
			if it.kind == 'r' {
				return 0, 0, abortf(true, fmt.Errorf("%w: %s holds record field %q, which is not tenant %q's",
					ErrConflict, r.Unit, it.field, r.Unit.Tenant))
			}
			skipped++
			continue
		}
		groups[sub] = append(groups[sub], it)
	}
	for _, j := range slices.Sorted(maps.Keys(groups)) {
		wn, sn, err := c.apply(ctx, r.targetRun(j), groups[j])
		if err != nil {
			return written, skipped, err
		}
		written, skipped = written+wn, skipped+sn
	}
	return written, skipped, nil
}

// splitCatchUp (CatchingUp) for a split: apply every source's change log round after round,
// verify the copy once the lag is small, and close the sources when the lag is at most
// CloseLag, when it stopped shrinking, or after MaxCatchUpRounds (as catchUp).
func (c *Coordinator) splitCatchUp(ctx context.Context, r *run) error {
	lag := converging{best: -1}
	for round := 1; ; round++ {
		total := 0
		for i := range r.lanes {
			lr := r.laneRun(i)
			upto, err := c.roundEnd(ctx, lr)
			if err != nil {
				return err
			}
			n, restarted, err := c.applyLog(ctx, lr, upto, routing.Ownership{Generation: lr.SourceGen, State: routing.StateOpen})
			if err != nil || restarted {
				return err
			}
			total += n
		}
		if err := c.refresh(ctx, r); err != nil {
			return err
		}
		if total > c.o.CloseLag && round < c.o.MaxCatchUpRounds && !lag.stalled(total) {
			continue
		}
		if r.sver == nil || r.sver.id != r.ID {
			// Verify while the sources still take writes; what changes after the pass
			// started is re-checked under the barrier.
			v, err := c.splitVerifyPass(ctx, r)
			if err != nil {
				return err
			}
			r.sver = v
			continue
		}
		return c.step(ctx, r, []State{CatchingUp}, ClosedA, false, "closedat", ms(c.o.Clock()))
	}
}

// splitClose (ClosedA) for a split: close every source (the barrier: each source's last
// log position is final), apply each source's log up to its barrier, verify, carry the
// highest version floor over to every target.
func (c *Coordinator) splitClose(ctx context.Context, r *run) error {
	if err := c.closeSplitSources(ctx, r); err != nil {
		return err
	}
	if err := c.refresh(ctx, r); err != nil {
		return err
	}
	floor, restarted, err := c.splitDrain(ctx, r)
	if err != nil || restarted {
		return err
	}
	if err := c.refresh(ctx, r); err != nil {
		return err
	}
	v := r.sver
	if v == nil || v.id != r.ID {
		// Resumed without this process's pass: the sources are closed, so a full pass is exact.
		if v, err = c.splitVerifyPass(ctx, r); err != nil {
			return err
		}
	}
	d, err := c.splitFinish(ctx, r, v)
	if err != nil {
		return err
	}
	if err := c.markSplitTargets(ctx, r, floor); err != nil {
		return err
	}
	return c.step(ctx, r, []State{ClosedA}, ReadyB, false,
		"drecords", i64(d.Records), "dtombs", i64(d.Tombstones), "dops", i64(d.Ops), "dsum", u64(d.Sum))
}

// closeSplitSources closes every source of r whose barrier is not recorded yet and
// records the barrier (its log's last position) on its lane. Every source's snapshot must
// be done.
func (c *Coordinator) closeSplitSources(ctx context.Context, r *run) error {
	for i := range r.lanes {
		lr := r.laneRun(i)
		if lr.Cursor != "done" {
			return fmt.Errorf("migrate: split %q: the snapshot of %s on %q is not done at the barrier", r.ID, lr.Unit, lr.Source)
		}
		if lr.Barrier != "" {
			continue
		}
		open := routing.Ownership{Generation: lr.SourceGen, State: routing.StateOpen}
		closed := routing.Ownership{Generation: lr.SourceGen, State: routing.StateClosed}
		barrier, err := c.transition(ctx, lr, c.shards[lr.Source], open, closed)
		if errors.Is(err, ErrFenced) {
			return err
		}
		if errors.Is(err, routing.ErrOwnershipChanged) {
			return abortf(false, fmt.Errorf("%w: closing source %s on %q: %v", ErrOwnershipChanged, lr.Unit, lr.Source, err))
		}
		if err != nil {
			return fmt.Errorf("migrate: close source %s on %q: %w", lr.Unit, lr.Source, err)
		}
		if err := c.step(ctx, lr, []State{ClosedA}, ClosedA, false, "barrier", barrier); err != nil {
			return err
		}
	}
	return nil
}

// splitDrain applies every closed source's log up to its barrier and returns the highest
// version floor of the sources. It reports restarted when a lane's copy restarted (the
// drive goes on from the journal record).
func (c *Coordinator) splitDrain(ctx context.Context, r *run) (floor uint64, restarted bool, err error) {
	for i := range r.lanes {
		lr := r.laneRun(i)
		closed := routing.Ownership{Generation: lr.SourceGen, State: routing.StateClosed}
		if _, restarted, err := c.applyLog(ctx, lr, lr.Barrier, closed); err != nil || restarted {
			return 0, restarted, err
		}
		if shortOf(lr.Barrier, lr.Applied) {
			return 0, false, fmt.Errorf("migrate: target applied %s of %s on %q, short of the barrier %s", lr.Applied, lr.Unit, lr.Source, lr.Barrier)
		}
		f, err := bound.Do(ctx, func() ([]any, error) {
			return c.shards[lr.Source].c.HMGet(ctx, routingfmt.Keys(c.keys.Tag(lr.Unit)).Own, "vfloor").Result()
		})
		if err != nil {
			return 0, false, fmt.Errorf("migrate: read source version floor: %w", err)
		}
		s, _ := f[0].(string)
		n, _ := strconv.ParseUint(s, 10, 64)
		floor = max(floor, n)
	}
	return floor, false, nil
}

// markSplitTargets carries the version floor (if any) over to every target, then marks
// each target's copy as complete and verified.
func (c *Coordinator) markSplitTargets(ctx context.Context, r *run, floor uint64) error {
	for j := range r.SplitTo {
		if floor > 0 {
			if err := c.prepare(ctx, r.targetRun(j), "floor", u64(floor)); err != nil {
				return err
			}
		}
		// The copy is complete and verified: mark it, last. The flip opens only a marked
		// target, so a target shard restored to a point before this (whose copy may lack
		// records) is never opened.
		if err := c.prepare(ctx, r.targetRun(j), "ready"); err != nil {
			return err
		}
	}
	return nil
}

// splitTable reports where table t is in r's split: published (the new spread is there),
// pending (the tenant is placed as when the split started), or neither (an error).
func (r *run) splitTable(t *routing.Table) (published bool, err error) {
	tenant := r.Unit.Tenant
	cur, spread := t.Spreads[tenant]
	switch {
	case r.merging() && !spread && t.Overrides[tenant] == r.SplitTo[0]:
		return true, nil
	case spread && slices.Equal(cur, r.SplitTo) && t.Overrides[tenant] == "":
		return true, nil
	case r.SplitFrom == nil && !spread && t.Overrides[tenant] == r.Source:
		return false, nil
	case r.SplitFrom != nil && spread && slices.Equal(cur, r.SplitFrom):
		return false, nil
	}
	return false, fmt.Errorf("%w: table generation %d places tenant %q as override %q, spread %q during the split's flip; the targets stay as they are",
		ErrOwnershipChanged, t.Generation, tenant, t.Overrides[tenant], cur)
}

// splitFlip (ReadyB) for a split: open every sub-bucket of the new spread at the new
// generation, then publish the table with the new spread by compare-and-set, guarded by
// the driver's epoch, retrying when another table was published in between.
func (c *Coordinator) splitFlip(ctx context.Context, r *run) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := c.store.Load(ctx)
		if err != nil {
			return fmt.Errorf("migrate: flip: %w", err)
		}
		published, err := r.splitTable(t)
		if err != nil {
			return err
		}
		gen := t.Generation + 1
		if published {
			gen = t.Generation
		}
		if err := c.splitMarked(ctx, r); err != nil {
			return err
		}
		for j := range r.SplitTo {
			if err := c.openSplitTarget(ctx, r.targetRun(j), t, gen); err != nil {
				return err
			}
		}
		if !published {
			var again bool
			if gen, again, err = c.publishSplit(ctx, r, t); err != nil {
				return err
			}
			if again {
				continue
			}
		}
		return c.flipped(ctx, r, gen)
	}
}

// splitNext is the pure plan of a split's publication: the table after t with tenant's
// override removed and its spread set to to.
func splitNext(t *routing.Table, tenant string, to []string) *routing.Table {
	nt := t.Next()
	if len(to) == 1 {
		// A merge: the spread is gone, the override names the one target.
		nt.SetSpread(tenant, nil)
		nt.SetOverride(tenant, to[0])
		return nt
	}
	nt.SetOverride(tenant, "")
	nt.SetSpread(tenant, to)
	return nt
}

// publishSplit publishes splitNext of t by compare-and-set (with PublishReshaped for a
// re-split) while r's drive still holds the split in ReadyB, checked in the same script.
// It returns the published table's generation; again is true when another table came
// first.
func (c *Coordinator) publishSplit(ctx context.Context, r *run, t *routing.Table) (gen uint64, again bool, err error) {
	nt := splitNext(t, r.Unit.Tenant, r.SplitTo)
	if r.SplitFrom == nil {
		again, err = c.publishGuarded(ctx, r, nt)
		return nt.Generation, again, err
	}
	err = c.store.PublishReshaped(ctx, nt, c.journalKey(r.ID), flipGuard(r), r.Unit.Tenant)
	again, err = c.published(r, err)
	return nt.Generation, again, err
}

// splitMarked checks, before the flip opens any target, that every target still importing
// carries the mark of its verified copy (set before ReadyB; only a wipe removes it). A
// target without it was restored to an earlier backup and may lack copied records: while
// no target is open yet, the split aborts, reopening its sources; once one is open (a
// resumed flip), openSplitTarget stops the flip instead, since an abort would leave that
// target open.
func (c *Coordinator) splitMarked(ctx context.Context, r *run) error {
	var unmarked *run
	for j := range r.SplitTo {
		tr := r.targetRun(j)
		b := c.shards[tr.Target]
		f, err := bound.Do(ctx, func() ([]any, error) {
			return b.c.HMGet(ctx, routingfmt.Keys(c.keys.Tag(tr.Unit)).Own, "state", "ready").Result()
		})
		if err != nil {
			return fmt.Errorf("migrate: flip: %w", err)
		}
		if st, _ := f[0].(string); st == string(routing.StateOpen) {
			return nil
		}
		if m, _ := f[1].(string); m != tr.ID && unmarked == nil {
			unmarked = tr
		}
	}
	if unmarked == nil {
		return nil
	}
	return abortf(true, fmt.Errorf("%w: target %q holds %s importing without the mark of its verified copy (restored to an earlier point?); the split stops before opening any target",
		ErrOwnershipChanged, unmarked.Target, unmarked.Unit))
}

// openSplitTarget opens target run tr's unit at generation gen if it is still importing for
// this migration, and checks that it is this migration's if it is open already (opened by
// an earlier attempt, at a generation no newer than gen).
func (c *Coordinator) openSplitTarget(ctx context.Context, tr *run, t *routing.Table, gen uint64) error {
	b := c.shards[tr.Target]
	own, _, err := b.r.Ownership(ctx, tr.Unit)
	if err != nil {
		return err
	}
	imp := routing.Ownership{Generation: tr.ImportGen, State: routing.StateImporting}
	switch {
	case own == imp:
		to := routing.Ownership{Generation: gen, State: routing.StateOpen}
		if err := c.openVerified(ctx, tr, b, to); err != nil {
			if errors.Is(err, ErrFenced) {
				return err
			}
			// errNotVerified after splitMarked passed: a restore landed between the two, or
			// another target is open already; the split stops with the sources closed.
			return fmt.Errorf("migrate: open target %s on %q: %w", tr.Unit, tr.Target, err)
		}
		return nil
	case own.State == routing.StateOpen && own.Generation <= t.Generation+1:
		mig, err := bound.Do(ctx, func() ([]any, error) { return b.c.HMGet(ctx, routingfmt.Keys(c.keys.Tag(tr.Unit)).Own, "mig").Result() })
		if err != nil {
			return fmt.Errorf("migrate: flip: %w", err)
		}
		if m, _ := mig[0].(string); m != tr.ID {
			return fmt.Errorf("%w: target %q holds %s open (%v) for another migration %q", ErrOwnershipChanged, tr.Target, tr.Unit, own, m)
		}
		return nil
	}
	return fmt.Errorf("%w: target %q holds %s as %v during the flip", ErrOwnershipChanged, tr.Target, tr.Unit, own)
}

// splitCancel is finishCancel for a split: delete the copy from every target, reopen every
// source this split closed, and end Cancelled or Aborted.
func (c *Coordinator) splitCancel(ctx context.Context, r *run) error {
	for j := range r.SplitTo {
		if err := c.prepare(ctx, r.targetRun(j), "abandon"); err != nil {
			return err
		}
	}
	if r.reopen {
		for i := range r.lanes {
			lr := r.laneRun(i)
			closed := routing.Ownership{Generation: lr.SourceGen, State: routing.StateClosed}
			open := routing.Ownership{Generation: lr.SourceGen, State: routing.StateOpen}
			_, err := c.transition(ctx, lr, c.shards[lr.Source], closed, open)
			if err != nil && !errors.Is(err, routing.ErrOwnershipChanged) {
				return fmt.Errorf("migrate: reopen source %s on %q: %w", lr.Unit, lr.Source, err)
			}
		}
	}
	end := Cancelled
	if r.abort {
		end = Aborted
		c.stats.aborted.Add(1)
	} else {
		c.stats.cancelled.Add(1)
	}
	return c.step(ctx, r, []State{Cancelling}, end, true)
}

// splitCleanup is Cleanup for a split: delete every source's closed copy (cleanup.lua per
// source, fenced by a new epoch of the tenant unit's counter).
func (c *Coordinator) splitCleanup(ctx context.Context, s Status) (Status, error) {
	r, err := c.acquire(ctx, s.ID, true, string(OwnedB))
	if err != nil {
		return r.Status, err
	}
	if r.epoch == 0 {
		return r.Status, invalidf("migration %q is %s; only a finished (OwnedB) migration is cleaned up", s.ID, r.State)
	}
	defer c.release(ctx, s.ID, r.epoch)
	for i := range r.lanes {
		lr := r.laneRun(i)
		k := routingfmt.Keys(c.keys.Tag(lr.Unit))
		reply, err := cleanupScript.Run(ctx, c.shards[lr.Source].c,
			[]string{k.Own, k.Records, k.Ops, k.OpExpiry, k.Tombstones, k.Log}, u64(lr.SourceGen), u64(r.epoch)).StringSlice()
		if err != nil {
			return r.Status, fmt.Errorf("migrate: cleanup of %s on source %q: %w", lr.Unit, lr.Source, err)
		}
		if len(reply) == 2 && reply[0] == "fenced" {
			return r.Status, c.fenced(r, reply[1], "source "+lr.Source)
		}
	}
	err = c.step(ctx, r, []State{OwnedB}, OwnedB, false, "cleaned", "1")
	return r.Status, err
}

// epochKeys are the keys acquire.lua takes a driver's epoch from: the journal record of
// migration id (status s), the epoch counter of its unit and, for a split, the counters
// of every sub-bucket it acts on, so that a later migration of one of those units is
// fenced against the split's drivers and the split's against earlier ones.
func (c *Coordinator) epochKeys(s Status, id string) []string {
	keys := []string{c.journalKey(id), c.epochKey(s.Unit)}
	for _, u := range s.splitLocks() {
		keys = append(keys, c.epochKey(u))
	}
	return keys
}
