package migrate

import (
	"context"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"strconv"
	"strings"

	"github.com/celebrity-go/celebrity/internal/errs"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/celebrity-go/celebrity/routing"
)

// CarveSpec asks for a carve-out: one tenant's records leave the shared hash bucket it lives
// in on the source shard for an override unit of the tenant on the target shard.
type CarveSpec struct {
	// ID names the migration; it must be unique. Default: a fresh random ID.
	ID string
	// Tenant is the tenant to carve out. It must be valid UTF-8, and the current table must
	// place it by its hash bucket (no override, no spread).
	Tenant string
	// Source, if set, must be the shard the current table assigns the tenant's bucket to.
	Source string
	// Target is the shard the tenant moves to.
	Target string
}

// Carve moves one tenant out of its shared hash bucket into an override unit of its own on
// the target shard: [Coordinator.StartCarve] then [Coordinator.Resume]. It is a durable
// migration like [Coordinator.Migrate], journaled, resumable, cancellable until the barrier
// and fenced the same way, with these differences:
//
//   - Only the tenant's items travel: its records (tombstones included) and the idempotency
//     records whose record field is the tenant's. The snapshot, the change log and the
//     verification of the bucket are filtered by the tenant's record-field prefix (see
//     routingfmt.RecordField); the other tenants' writes in the bucket's log are skipped.
//     Idempotency records written before op records named their field cannot be told apart
//     and do not travel.
//   - The barrier closes the tenant only: one script on the source marks the tenant as
//     moved out of the bucket (routing refuses its reads and writes there with
//     routing.ErrStaleRoute from then on) and returns the bucket's change-log position,
//     final for the tenant. The bucket stays open: its other tenants never wait.
//   - The flip opens the tenant's unit on the target and publishes a table with an
//     override of the tenant to the target. A router still on the old table is refused
//     by the source for that tenant, learns the new table and retries on the target with
//     the same op ID; an operation applied before the barrier replays its first result.
//   - The migration holds the bucket's lock: one carve-out or move of a bucket at a time.
//     Its drivers take their fencing epochs from the tenant unit's counter (so a later
//     migration of the tenant's override is fenced against them), and fence the source
//     with a per-tenant field of the bucket's ownership record, leaving the bucket's own
//     fence to the bucket's migrations.
//   - [Coordinator.Cleanup] deletes the tenant's records and op records from the bucket
//     after the grace period; until then they stay there, closed to routed reads and writes
//     (readable with plain Redis commands for inspection), and the change log keeps the
//     tenant's old entries until it is trimmed. A flip back would be safe only until the
//     first write on the target; after it, going back must be a new migration:
//     [Coordinator.Fold].
//
// A tenant with no records is carved out all the same (nothing is copied). Bad input (an
// empty or invalid tenant, a tenant already overridden or spread, an unknown or equal
// target) fails with ErrInvalid and changes nothing.
func (c *Coordinator) Carve(ctx context.Context, spec CarveSpec) (Status, error) {
	s, err := c.StartCarve(ctx, spec)
	if err != nil {
		return s, err
	}
	return c.Resume(ctx, s.ID)
}

// StartCarve checks spec against the current table and the source bucket's ownership
// record, writes the carve-out's journal record (state OwnedA) and takes the bucket's
// migration lock, like [Coordinator.Start] does for a unit. It changes nothing on the
// shards. The returned Status has Unit = the tenant's override unit and From = its bucket.
func (c *Coordinator) StartCarve(ctx context.Context, spec CarveSpec) (Status, error) {
	u, id, err := checkTenantSpec(spec.Tenant, spec.ID, c.o.NewID)
	if err != nil {
		return Status{}, err
	}
	if prev, found, err := c.replay(ctx, id, func(prev Status) bool {
		return prev.Unit == u && prev.From.Kind == routing.KindBucket && prev.Target == spec.Target &&
			(spec.Source == "" || spec.Source == prev.Source)
	}); found || err != nil {
		return prev, err
	}
	t, err := c.store.Load(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("migrate: start carve-out: %w", err)
	}
	p, err := planCarve(t, spec, c.hasShard)
	if err != nil {
		return Status{}, err
	}
	if err := c.busy(ctx, Status{ID: id, Unit: u, From: p.bucket}); err != nil {
		return Status{}, err
	}
	own, moved, err := c.shards[p.source].r.Ownership(ctx, p.bucket)
	if err != nil {
		return Status{}, fmt.Errorf("migrate: start carve-out: %w", err)
	}
	if err := checkOpen("source", p.source, p.bucket, own, t); err != nil {
		return Status{}, err
	}
	if _, ok := moved[spec.Tenant]; ok {
		return Status{}, fmt.Errorf("%w: source %q marks tenant %q as moved out of %s, but the table (generation %d) has no override for it",
			ErrOwnershipChanged, p.source, spec.Tenant, p.bucket, t.Generation)
	}
	tgt, _, err := c.shards[p.target].r.Ownership(ctx, u)
	if err != nil {
		return Status{}, fmt.Errorf("migrate: start carve-out: %w", err)
	}
	if err := c.checkImport(ctx, p.target, u, id, tgt); err != nil {
		return Status{}, err
	}
	return c.record(ctx, Status{ID: id, Unit: u, From: p.bucket, Source: p.source, Target: p.target, State: OwnedA,
		SourceGen: own.Generation, ImportGen: max(t.Generation+1, tgt.Generation), Created: c.o.Clock()})
}

// tenantPlan is what the pure planning step of a carve-out or fold-back ([planCarve],
// [planFold]) settles from the spec and the current table, before any shard is read.
type tenantPlan struct {
	unit   routing.Unit // unit is the tenant's override unit.
	bucket routing.Unit // bucket is the tenant's hash bucket.
	source string       // source is the shard the tenant's items leave.
	target string       // target is the shard they go to.
}

// checkTenantSpec is the check StartCarve and StartFold share before they read anything:
// the tenant must name a valid tenant unit, and the migration ID (newID fills an empty one)
// must be 1..200 bytes without braces. It returns the tenant's unit and the ID; it is pure
// apart from newID.
func checkTenantSpec(tenant, id string, newID func() string) (routing.Unit, string, error) {
	u := routing.TenantUnit(tenant)
	if err := u.Validate(); err != nil {
		return routing.Unit{}, "", invalidf("tenant: %v", err)
	}
	if id == "" {
		id = newID()
	}
	if err := checkID(id); err != nil {
		return routing.Unit{}, "", err
	}
	return u, id, nil
}

// checkID refuses a migration ID that is longer than 200 bytes or contains braces.
func checkID(id string) error {
	if len(id) > 200 || slot.HasBraces(id) {
		return invalidf("migration ID must be 1..200 bytes without braces, got %d bytes (%q)", len(id), errs.Short(id))
	}
	return nil
}

// planCarve is StartCarve's pure planning step: it checks spec against table t and the
// shards the coordinator has clients for (has) and names the tenant's bucket, its source
// (the bucket's shard) and the target. Every refusal wraps ErrInvalid.
func planCarve(t *routing.Table, spec CarveSpec, has func(shard string) bool) (tenantPlan, error) {
	if o := t.Overrides[spec.Tenant]; o != "" {
		return tenantPlan{}, invalidf("tenant %q is already overridden onto shard %q (table generation %d); move its unit with Migrate",
			spec.Tenant, o, t.Generation)
	}
	if _, ok := t.Spreads[spec.Tenant]; ok {
		return tenantPlan{}, invalidf("tenant %q is spread (table generation %d); it has no bucket records to carve out",
			spec.Tenant, t.Generation)
	}
	b := routing.BucketOf(spec.Tenant, t.Buckets)
	source := t.BucketOwner(b)
	switch {
	case source == "":
		return tenantPlan{}, invalidf("the table (generation %d) does not assign bucket %d of tenant %q", t.Generation, b, spec.Tenant)
	case spec.Source != "" && spec.Source != source:
		return tenantPlan{}, invalidf("tenant %q (bucket %d) is on shard %q, not on the given source %q", spec.Tenant, b, source, spec.Source)
	case spec.Target == source:
		return tenantPlan{}, invalidf("target %q is the source of tenant %q (bucket %d)", spec.Target, spec.Tenant, b)
	case !has(spec.Target):
		return tenantPlan{}, invalidf("unknown target shard %q", spec.Target)
	case !has(source):
		return tenantPlan{}, invalidf("no client for source shard %q", source)
	}
	if !containsShard(t, spec.Target) {
		return tenantPlan{}, invalidf("target shard %q is not named in the table (generation %d)", spec.Target, t.Generation)
	}
	return tenantPlan{unit: routing.TenantUnit(spec.Tenant), bucket: routing.BucketUnit(b), source: source, target: spec.Target}, nil
}

// carving reports whether s is a carve-out (its records leave a shared bucket).
func (s Status) carving() bool { return s.From.Kind == routing.KindBucket }

// carveField is the journal's "carve" field: the source bucket of a carve-out, "" otherwise.
func (s Status) carveField() string {
	if !s.carving() {
		return ""
	}
	return strconv.FormatUint(uint64(s.From.Bucket), 10)
}

// sourceUnit is the unit whose keys hold the records on the source.
func (s Status) sourceUnit() routing.Unit {
	if s.carving() {
		return s.From
	}
	return s.Unit
}

// lockUnit is the unit whose migration lock the migration holds: the bucket of a carve-out,
// so that a carve-out and a move of its bucket (or another carve-out of it) never overlap.
func (s Status) lockUnit() routing.Unit { return s.sourceUnit() }

// srcKeys are the keys of what the migration copies on the source.
func (c *Coordinator) srcKeys(r *run) routingfmt.UnitKeys {
	return routingfmt.Keys(c.keys.Tag(r.sourceUnit()))
}

// fieldPrefix is the record-field prefix of the carved tenant.
func (s Status) fieldPrefix() string { return routingfmt.RecordField(s.Unit.Tenant, "") }

// keep reports whether a record field travels with the migration: every field, or the
// carved tenant's only.
func (s Status) keep(field string) bool {
	return !s.carving() || strings.HasPrefix(field, s.fieldPrefix())
}

// keepOp reports whether an idempotency record (stored form) travels with the migration.
func (s Status) keepOp(val string) bool {
	if !s.carving() {
		return true
	}
	op, err := routingfmt.DecodeOpRecord(val)
	return err == nil && s.keep(op.Field)
}

// keepPairs filters one HSCAN page (field, value, ...) of the source's records ("rec") or
// idempotency records ("ops") to what travels.
func (s Status) keepPairs(phase string, kv []string) []string {
	if !s.carving() {
		return kv
	}
	out := kv[:0:0]
	for i := 0; i+1 < len(kv); i += 2 {
		if (phase == "rec" && s.keep(kv[i])) || (phase == "ops" && s.keepOp(kv[i+1])) {
			out = append(out, kv[i], kv[i+1])
		}
	}
	return out
}

// scanMatch is the HSCAN MATCH pattern of the source's records ("rec") or idempotency
// records ("ops") that travel ("": all). Op records are filtered by value, not by name.
func (s Status) scanMatch(phase string) string {
	if !s.carving() || phase != "rec" {
		return ""
	}
	return globEscape(s.fieldPrefix()) + "*"
}

// globEscape escapes the characters Redis's glob matching gives a meaning.
func globEscape(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\', '*', '?', '[', ']':
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// sourceHolds reports whether the probed source is as the migration expects it: the unit's
// record is want, and, for an upto other than "+", the log ends at upto. For a carve-out the
// bucket stays open at SourceGen, and want says whether the tenant is open (unmarked) or
// closed (marked by this carve-out); the bucket's log goes on past the barrier with the
// other tenants' writes.
func (s Status) sourceHolds(p probeResult, want routing.Ownership, upto string) bool {
	if !s.carving() {
		return p.own == want && (upto == "+" || p.last == upto)
	}
	if p.own != (routing.Ownership{Generation: s.SourceGen, State: routing.StateOpen}) {
		return false
	}
	if want.State == routing.StateOpen {
		return p.mark == ""
	}
	return p.mark == s.ID
}

// tableOwner is the shard table t assigns the migrated unit to; for a carve-out without an
// override yet, the source when the tenant's bucket is still there.
func (s Status) tableOwner(t *routing.Table) string {
	if !s.carving() {
		return t.Owner(s.Unit)
	}
	if o := t.Owner(s.Unit); o != "" {
		return o
	}
	if _, ok := t.Spreads[s.Unit.Tenant]; ok {
		return ""
	}
	return t.BucketOwner(s.From.Bucket)
}

// roundEnd is where a catch-up round stops reading the source's log: its last position
// when the round starts, so that a round ends even while writers (for a carve-out, also
// the bucket's other tenants, whose entries it skips but reads) write faster than the copy
// reads.
func (c *Coordinator) roundEnd(ctx context.Context, r *run) (string, error) {
	p, err := c.probe(ctx, r, "0-0", "+", 0)
	if err != nil {
		return "", err
	}
	return p.last, nil
}

// closeBarrier closes the source: the unit's record for a migration, the tenant's mark in
// its bucket for a carve-out. It returns the change-log position final for what moves.
func (c *Coordinator) closeBarrier(ctx context.Context, r *run, a *shard, open, closed routing.Ownership) (string, error) {
	if !r.carving() {
		return c.transition(ctx, r, a, open, closed)
	}
	return c.carveSource(ctx, r, "close")
}

// reopenSource reopens a source this migration closed (an abort before the flip).
func (c *Coordinator) reopenSource(ctx context.Context, r *run, closed, open routing.Ownership) (string, error) {
	if !r.carving() {
		return c.transition(ctx, r, c.shards[r.Source], closed, open)
	}
	return c.carveSource(ctx, r, "reopen")
}

// carveSource runs carve.lua's close or reopen on the source bucket, fenced by r's epoch.
func (c *Coordinator) carveSource(ctx context.Context, r *run, mode string) (string, error) {
	a := c.shards[r.Source]
	k := c.srcKeys(r)
	reply, err := carveScript.Run(ctx, a.c, []string{k.Own, k.Log, k.Records, k.Ops, k.OpExpiry, k.Tombstones},
		mode, r.Unit.Tenant, r.ID, u64(r.epoch), u64(r.SourceGen), u64(r.ImportGen)).StringSlice()
	if err != nil {
		return "", fmt.Errorf("migrate: carve-out %s of tenant %q on source %q: %w", mode, r.Unit.Tenant, r.Source, err)
	}
	switch {
	case len(reply) == 2 && reply[0] == "ok":
		return reply[1], nil
	case len(reply) == 2 && reply[0] == "fenced":
		return "", c.fenced(r, reply[1], "source "+r.Source)
	case len(reply) == 4 && reply[0] == "changed":
		return "", fmt.Errorf("%w: source %q holds %s at generation %s state %q (tenant %q marked by %q), expected open at %d with the tenant unmarked",
			routing.ErrOwnershipChanged, r.Source, r.From, reply[1], reply[2], r.Unit.Tenant, reply[3], r.SourceGen)
	}
	return "", fmt.Errorf("migrate: carve-out %s on source %q: malformed reply %q", mode, r.Source, reply)
}

// carveCleanup deletes a finished carve-out's closed copy (the tenant's records and op
// records in the bucket on the source), page by page, while the tenant's mark there is this
// carve-out's; the bucket's change log is left alone (removing entries from it would look
// like lost entries to a later migration of the bucket).
func (c *Coordinator) carveCleanup(ctx context.Context, s Status) (Status, error) {
	k := routingfmt.Keys(c.keys.Tag(s.From))
	for _, phase := range []string{"rec", "ops"} {
		key, kind := k.Records, "r"
		if phase == "ops" {
			key, kind = k.Ops, "o"
		}
		ours, err := c.cleanupPhase(ctx, s, key, kind, phase)
		if err != nil {
			return s, err
		}
		if !ours {
			// The mark is not this carve-out's any more (the tenant came back to the
			// bucket): the data there is live again; nothing is deleted.
			break
		}
	}
	r := &run{Status: s}
	err := c.step(ctx, r, []State{OwnedB}, OwnedB, false, "cleaned", "1")
	return r.Status, err
}

// cleanupPhase deletes the carved tenant's items of one kind ("r" records in hash key, phase
// "rec"; "o" op records, phase "ops") from the bucket on the source, page by page. ours is
// false when the tenant's mark stopped being this carve-out's (nothing more is deleted).
func (c *Coordinator) cleanupPhase(ctx context.Context, s Status, key, kind, phase string) (ours bool, err error) {
	a := c.shards[s.Source]
	var cur uint64
	for {
		kv, next, err := bound.Do2(ctx, func() ([]string, uint64, error) {
			return a.c.HScan(ctx, key, cur, s.scanMatch(phase), int64(c.o.BatchSize)).Result()
		})
		if err != nil {
			return false, fmt.Errorf("migrate: cleanup scan on source %q: %w", s.Source, err)
		}
		if ours, err := c.carvePurge(ctx, s, purgeItems(kind, s.keepPairs(phase, kv))); err != nil || !ours {
			return false, err
		}
		if cur = next; cur == 0 {
			return true, nil
		}
	}
}

// purgeItems turns one scanned page (field, value, ...) into carve.lua's purge items (kind,
// field, ...). It is pure.
func purgeItems(kind string, kv []string) []string {
	items := make([]string, 0, len(kv))
	for i := 0; i+1 < len(kv); i += 2 {
		items = append(items, kind, kv[i])
	}
	return items
}

// carvePurge deletes items (kind, field, ...) from the bucket on the source with one
// carve.lua "purge", if the tenant's mark there is still s's; ours reports whether it was.
func (c *Coordinator) carvePurge(ctx context.Context, s Status, items []string) (ours bool, err error) {
	if len(items) == 0 {
		return true, nil
	}
	k := routingfmt.Keys(c.keys.Tag(s.From))
	args := []any{"purge", s.Unit.Tenant, s.ID, "0", u64(s.SourceGen), u64(max(s.ImportGen, 1))}
	for _, it := range items {
		args = append(args, it)
	}
	reply, err := carveScript.Run(ctx, c.shards[s.Source].c, []string{k.Own, k.Log, k.Records, k.Ops, k.OpExpiry, k.Tombstones},
		args...).StringSlice()
	if err != nil {
		return false, fmt.Errorf("migrate: cleanup of tenant %q on source %q: %w", s.Unit.Tenant, s.Source, err)
	}
	if len(reply) != 2 || reply[0] != "ok" {
		return false, fmt.Errorf("migrate: cleanup on source %q: malformed reply %q", s.Source, reply)
	}
	return reply[1] != "-1", nil
}

// carveVerifyPass is verifyPass for a carve-out or a fold-back: the bucket's side (the
// source of a carve-out, the target of a fold-back) is the tenant's part of the bucket
// (records by field prefix, op records by the field they name), the other side the
// tenant's unit.
func (c *Coordinator) carveVerifyPass(ctx context.Context, r *run) (*verifier, error) {
	p, err := c.probe(ctx, r, "0-0", "+", 0)
	if err != nil {
		return nil, err
	}
	v := &verifier{id: r.ID, pos: p.last, a: newSide(), b: newSide(), dirty: map[string]bool{}}
	a, b := c.shards[r.Source], c.shards[r.Target]
	ka, kb := c.srcKeys(r), c.dstKeys(r)
	for _, sd := range []struct {
		from, to     *shard
		kfrom, kto   routingfmt.UnitKeys
		mine, theirs *side
		filter       bool
	}{{a, b, ka, kb, v.a, v.b, r.carving()}, {b, a, kb, ka, v.b, v.a, r.folding()}} {
		for _, kind := range []string{"r", "o"} {
			phase, from, to := "rec", sd.kfrom.Records, sd.kto.Records
			if kind == "o" {
				phase, from, to = "ops", sd.kfrom.Ops, sd.kto.Ops
			}
			h := hashScan{from: sd.from, to: sd.to, fromKey: from, toKey: to, kind: kind, mine: sd.mine, theirs: sd.theirs}
			if sd.filter {
				h.match = tenantMatch(r.Unit.Tenant, phase)
				h.keep = func(kv []string) []string { return tenantPairs(r.Unit.Tenant, phase, kv) }
			}
			if err := c.verifyScan(ctx, v, h); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}
