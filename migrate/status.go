package migrate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/celebrity-go/celebrity/routing"
)

// State is a migration's state in its journal.
type State string

// The states of a durable migration, in order, and the ways out.
const (
	// OwnedA: the journal record exists; the source owns the unit; the target is being
	// claimed for import.
	OwnedA State = "OwnedA"
	// Copying: the snapshot of the source is being copied to the target while the source
	// takes writes.
	Copying State = "Copying"
	// CatchingUp: the source's change log is being applied to the target from the
	// snapshot's start position; the copy is verified.
	CatchingUp State = "CatchingUp"
	// ClosedA: the source is closed (or being closed) for the old generation; the target
	// applies the change log up to the barrier. Writes pause from here.
	ClosedA State = "ClosedA"
	// ReadyB: the target holds everything up to the barrier and matched the source's digest;
	// it is being opened at the new generation and the new table published.
	ReadyB State = "ReadyB"
	// OwnedB: done. The target owns the unit at the new generation.
	OwnedB State = "OwnedB"
	// Cancelling: cancelled or aborted before ClosedA finished; the target's copy is being
	// removed.
	Cancelling State = "Cancelling"
	// Cancelled: cancelled by an operator; the source owns the unit, the target holds no trace.
	Cancelled State = "Cancelled"
	// Aborted: stopped by the migration itself (see Status.Reason); the source owns the unit
	// (unless its ownership changed underneath), the target holds no trace.
	Aborted State = "Aborted"
)

// Terminal reports whether s is a final state.
func (s State) Terminal() bool { return s == OwnedB || s == Cancelled || s == Aborted }

// Cancellable reports whether an operator may still cancel a migration in state s.
func (s State) Cancellable() bool { return s == OwnedA || s == Copying || s == CatchingUp }

// Status is a migration's journal record, as stored in the control Redis: what an operator
// needs to see where a migration is and what it did.
type Status struct {
	ID     string       // ID is the migration's ID.
	Unit   routing.Unit // Unit is the placement unit being moved.
	Source string       // Source is the shard the unit leaves.
	Target string       // Target is the shard the unit moves to.
	State  State        // State is the current state.

	// From is the unit the records leave on the source when it is not Unit: for a carve-out
	// (see [Coordinator.Carve]), the tenant's hash bucket, while Unit is the tenant's
	// override unit on the target. The zero Unit otherwise.
	From routing.Unit
	// Into is the unit the records return into on the target when it is not Unit: for a
	// fold-back (see [Coordinator.Fold]), the tenant's hash bucket, while Unit is the
	// tenant's override unit on the source. The zero Unit otherwise.
	Into routing.Unit

	SourceGen uint64 // SourceGen is the generation of the source's open ownership record.
	// ImportGen is the generation of the target's importing record; for a fold-back, the
	// generation of the target bucket's record, open throughout.
	ImportGen uint64
	// FlipGen is the generation the target opened at (0 before OwnedB); for a fold-back,
	// the table generation without the override.
	FlipGen uint64

	SnapshotPos string // SnapshotPos is the source's change-log ID when the snapshot started.
	Cursor      string // Cursor is the snapshot cursor ("rec:<n>", "ops:<n>" or "done").
	Applied     string // Applied is the last change-log ID applied to the target.
	Barrier     string // Barrier is the source's final change-log ID ("" before ClosedA).
	Snapshots   int    // Snapshots counts snapshot starts (more than one after a log trim).

	Copied     int64         // Copied counts snapshot items written to the target.
	LogApplied int64         // LogApplied counts change-log entries applied to the target.
	Pause      time.Duration // Pause is the write pause, barrier to flip (OwnedB only).
	Digest     Digest        // Digest is the verified digest of the unit (from ReadyB on).

	Reason   string    // Reason says why a migration was cancelled or aborted.
	Created  time.Time // Created is when the migration was started.
	Updated  time.Time // Updated is the last journal write.
	ClosedAt time.Time // ClosedAt is when the source was closed (zero before).
	Flipped  time.Time // Flipped is when the new table was published (zero before).
	Cleaned  bool      // Cleaned is true once the source's closed copy was deleted.

	// Cache is true for a cache-mode move ([Cache.Move]), listed by [Coordinator.Unfinished]
	// with its tenant unit, shards and state only; see it with [Cache.Status], continue it
	// with [Cache.Resume].
	Cache bool

	Epoch      uint64    // Epoch is the fencing epoch of the migration's current (or last) driver; 0 before the first.
	LeaseUntil time.Time // LeaseUntil is when that driver's lease ends, on the control Redis's clock (zero: released).

	appliedN uint64 // appliedN is how many log entries had been added up to Applied.
	abort    bool   // abort marks a Cancelling migration that stops by itself (ends Aborted).
	reopen   bool   // reopen marks a Cancelling migration whose source must be reopened.

	// SplitFrom and SplitTo describe a split (see [Coordinator.Split]): SplitTo names the
	// shard of each sub-bucket of the new spread, SplitFrom the shards of the old spread
	// of a re-split (nil when the tenant was overridden onto Source). Both nil otherwise.
	SplitFrom, SplitTo []string

	lanes []lane // lanes are a split's sources and their copy progress
}

// String returns a one-line report for operators.
func (s Status) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "migration %s: %s %s -> %s: %s", s.ID, s.Unit, s.Source, s.Target, s.State)
	if s.carving() {
		fmt.Fprintf(&b, " (carve-out of %s)", s.From)
	}
	if s.folding() {
		fmt.Fprintf(&b, " (fold-back into %s)", s.Into)
	}
	if s.splitting() {
		fmt.Fprintf(&b, " (split from %q into %q)", s.splitSources(), s.SplitTo)
	}
	switch s.State {
	case Copying:
		fmt.Fprintf(&b, " (snapshot from %s, cursor %s, %d items copied)", s.SnapshotPos, s.Cursor, s.Copied)
	case CatchingUp:
		fmt.Fprintf(&b, " (applied up to %s, %d log entries)", s.Applied, s.LogApplied)
	case ClosedA, ReadyB:
		fmt.Fprintf(&b, " (barrier %s, applied %s)", s.Barrier, s.Applied)
	case OwnedB:
		fmt.Fprintf(&b, " at generation %d (pause %v, %d copied, %d log entries, digest %v)",
			s.FlipGen, s.Pause, s.Copied, s.LogApplied, s.Digest)
	case Cancelling, Cancelled, Aborted:
		fmt.Fprintf(&b, ": %s", s.Reason)
	}
	return b.String()
}

// fields returns the journal hash fields of the immutable part of s.
func (s Status) fields() []any {
	return append([]any{
		"id", s.ID, "kind", strconv.Itoa(int(s.Unit.Kind)), "bucket", strconv.FormatUint(uint64(s.Unit.Bucket), 10),
		"tenant", s.Unit.Tenant, "sub", strconv.FormatUint(uint64(s.Unit.Sub), 10),
		"source", s.Source, "target", s.Target,
		"srcgen", u64(s.SourceGen), "impgen", u64(s.ImportGen),
		"created", ms(s.Created), "updated", ms(s.Created), "carve", s.carveField(),
		"fold", s.foldField(),
	}, s.splitFields()...)
}

// parseStatus reads a journal record (its fields as HGETALL returns them) into a Status. A
// record with a field that should be a number and is not, or without an ID, a state or a
// valid unit, is malformed: the error names the fields that did not parse.
func parseStatus(m map[string]string) (Status, error) {
	var s Status
	f := &journalFields{m: m}
	num, at := f.num, f.at
	s.ID = m["id"]
	s.Unit = routing.Unit{Kind: routing.UnitKind(num("kind")), Bucket: uint32(num("bucket")),
		Tenant: m["tenant"], Sub: uint32(num("sub"))}
	s.Source, s.Target, s.State = m["source"], m["target"], State(m["state"])
	s.SourceGen, s.ImportGen, s.FlipGen = num("srcgen"), num("impgen"), num("flipgen")
	s.SnapshotPos, s.Cursor, s.Applied, s.Barrier = m["snappos"], m["cursor"], m["applied"], m["barrier"]
	s.Snapshots = int(num("snapshots"))
	s.Copied, s.LogApplied = int64(num("copied")), int64(num("logapplied"))
	s.Pause = time.Duration(num("pauseus")) * time.Microsecond
	s.Digest = Digest{Records: int64(num("drecords")), Tombstones: int64(num("dtombs")),
		Ops: int64(num("dops")), Sum: num("dsum")}
	s.Reason = m["reason"]
	s.Created, s.Updated, s.ClosedAt, s.Flipped = at("created"), at("updated"), at("closedat"), at("flipped")
	s.Cleaned = m["cleaned"] == "1"
	s.Epoch, s.LeaseUntil = num("epoch"), at("lease")
	s.abort, s.reopen = m["abort"] == "1", m["reopen"] == "1"
	s.appliedN = num("appliedn")
	if m["carve"] != "" {
		s.From = routing.BucketUnit(uint32(num("carve")))
	}
	if m["fold"] != "" {
		s.Into = routing.BucketUnit(uint32(num("fold")))
	}
	if err := s.parseSplit(m); err != nil {
		f.errs = append(f.errs, err.Error())
	}
	if len(f.errs) > 0 || s.ID == "" || s.State == "" || s.Unit.Validate() != nil {
		return s, fmt.Errorf("migrate: malformed journal record %q (fields %v)", s.ID, f.errs)
	}
	return s, nil
}

// journalFields reads a journal record's fields, noting those that should be numbers and
// are not (errs).
type journalFields struct {
	m    map[string]string
	errs []string
}

// num reads field k as a number; a missing or empty field is 0.
func (f *journalFields) num(k string) uint64 {
	v, ok := f.m[k]
	if !ok || v == "" {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		f.errs = append(f.errs, k)
	}
	return n
}

// at reads field k as a time in unix ms; a missing, empty or zero field is the zero time.
func (f *journalFields) at(k string) time.Time {
	n := f.num(k)
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(n))
}

func u64(n uint64) string   { return strconv.FormatUint(n, 10) }
func i64(n int64) string    { return strconv.FormatInt(n, 10) }
func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
