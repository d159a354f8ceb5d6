package migrate

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"strconv"
	"strings"

	"github.com/celebrity-go/celebrity/routing"
)

// FoldSpec asks for a fold-back: an overridden tenant's records leave its override unit on
// the source shard and return into its shared hash bucket on the shard that owns the bucket.
type FoldSpec struct {
	// ID names the migration; it must be unique. Default: a fresh random ID.
	ID string
	// Tenant is the tenant to fold back. It must be valid UTF-8, and the current table must
	// place it by an override (not a spread).
	Tenant string
	// Source, if set, must be the shard the current table overrides the tenant onto.
	Source string
	// Target, if set, must be the shard the current table assigns the tenant's hash bucket
	// to (the target is always that shard; it may be the source itself).
	Target string
}

// Fold returns an overridden tenant into its shared hash bucket: [Coordinator.StartFold]
// then [Coordinator.Resume]. It is the reverse of [Coordinator.Carve], a new migration with
// a new table generation, durable like [Coordinator.Migrate]: journaled, resumable,
// cancellable until the barrier, fenced the same way, with these differences:
//
//   - The target is the tenant's bucket, which stays open for its other tenants
//     throughout. Before anything is copied, one script marks the tenant as moved out of
//     the bucket for this fold-back (routing refuses the tenant's reads and writes there;
//     the mark is usually there already, left by the carve-out), and the tenant's items an
//     earlier era left in the bucket (a carve-out's closed copy not cleaned up) are
//     deleted, so a stale copy is never mistaken for data. The copy, the change log and
//     the verification then write and compare the tenant's items in the bucket only
//     (told apart by the record field, see routingfmt.RecordField).
//   - The barrier closes the tenant's override unit on the source, as a move of the unit
//     does. The flip removes the tenant's mark from the bucket (the bucket serves the
//     tenant again from here; the source was closed before) and publishes a table without
//     the override. A router still on the old table is refused by the source, learns the
//     new table and retries in the bucket with the same op ID; an operation applied
//     before the barrier replays its first result.
//   - The migration holds two locks: the tenant unit's (no move of the override meanwhile)
//     and the bucket's (no move or carve-out of the bucket meanwhile). Its drivers take
//     their fencing epochs from the tenant unit's counter and fence the bucket through the
//     tenant's field of the bucket's ownership record, as a carve-out does.
//   - A cancel or abort deletes the tenant's copied items from the bucket and leaves the
//     tenant marked there (it stays overridden); the source keeps (or gets back) the unit.
//   - [Coordinator.Cleanup] deletes the override unit's closed copy on the source after
//     the grace period, as for a move of the unit.
//
// A tenant with no records folds back all the same (nothing is copied). Bad input (an empty
// or invalid tenant, a tenant not overridden or spread, a source or target that is not the
// one the table names, an unknown shard) fails with ErrInvalid and changes nothing.
func (c *Coordinator) Fold(ctx context.Context, spec FoldSpec) (Status, error) {
	s, err := c.StartFold(ctx, spec)
	if err != nil {
		return s, err
	}
	return c.Resume(ctx, s.ID)
}

// StartFold checks spec against the current table, the source's record of the tenant's
// unit and the target's record of the bucket, writes the fold-back's journal record (state
// OwnedA) and takes the tenant unit's and the bucket's migration locks in one step, like
// [Coordinator.Start] does for a unit. It changes nothing on the shards. The returned Status
// has Unit = the tenant's override unit and Into = its bucket.
func (c *Coordinator) StartFold(ctx context.Context, spec FoldSpec) (Status, error) {
	u, id, err := checkTenantSpec(spec.Tenant, spec.ID, c.o.NewID)
	if err != nil {
		return Status{}, err
	}
	if prev, found, err := c.replay(ctx, id, func(prev Status) bool {
		return prev.Unit == u && prev.folding() && (spec.Target == "" || spec.Target == prev.Target) &&
			(spec.Source == "" || spec.Source == prev.Source)
	}); found || err != nil {
		return prev, err
	}
	t, err := c.store.Load(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("migrate: start fold-back: %w", err)
	}
	p, err := planFold(t, spec, c.hasShard)
	if err != nil {
		return Status{}, err
	}
	if err := c.busy(ctx, Status{ID: id, Unit: u, Into: p.bucket}); err != nil {
		return Status{}, err
	}
	own, _, err := c.shards[p.source].r.Ownership(ctx, u)
	if err != nil {
		return Status{}, fmt.Errorf("migrate: start fold-back: %w", err)
	}
	if err := checkOpen("source", p.source, u, own, t); err != nil {
		return Status{}, err
	}
	bown, _, err := c.shards[p.target].r.Ownership(ctx, p.bucket)
	if err != nil {
		return Status{}, fmt.Errorf("migrate: start fold-back: %w", err)
	}
	if err := checkOpen("target", p.target, p.bucket, bown, t); err != nil {
		return Status{}, err
	}
	return c.record(ctx, Status{ID: id, Unit: u, Into: p.bucket, Source: p.source, Target: p.target, State: OwnedA,
		SourceGen: own.Generation, ImportGen: bown.Generation, Created: c.o.Clock()})
}

// planFold is StartFold's pure planning step: it checks spec against table t and the
// shards the coordinator has clients for (has) and names the tenant's bucket, the source
// (the shard the table overrides the tenant onto) and the target (the bucket's shard).
// Every refusal wraps ErrInvalid.
func planFold(t *routing.Table, spec FoldSpec, has func(shard string) bool) (tenantPlan, error) {
	if _, ok := t.Spreads[spec.Tenant]; ok {
		return tenantPlan{}, invalidf("tenant %q is spread (table generation %d); only an overridden tenant folds back",
			spec.Tenant, t.Generation)
	}
	source := t.Overrides[spec.Tenant]
	b := routing.BucketOf(spec.Tenant, t.Buckets)
	target := t.BucketOwner(b)
	switch {
	case source == "":
		return tenantPlan{}, invalidf("tenant %q is not overridden (table generation %d); it is in its bucket already",
			spec.Tenant, t.Generation)
	case spec.Source != "" && spec.Source != source:
		return tenantPlan{}, invalidf("tenant %q is overridden onto shard %q, not onto the given source %q", spec.Tenant, source, spec.Source)
	case target == "":
		return tenantPlan{}, invalidf("the table (generation %d) does not assign bucket %d of tenant %q", t.Generation, b, spec.Tenant)
	case spec.Target != "" && spec.Target != target:
		return tenantPlan{}, invalidf("bucket %d of tenant %q is on shard %q, not on the given target %q (a fold-back goes to the bucket's shard)",
			b, spec.Tenant, target, spec.Target)
	case !has(source):
		return tenantPlan{}, invalidf("no client for source shard %q", source)
	case !has(target):
		return tenantPlan{}, invalidf("no client for target shard %q", target)
	}
	return tenantPlan{unit: routing.TenantUnit(spec.Tenant), bucket: routing.BucketUnit(b), source: source, target: target}, nil
}

// folding reports whether s is a fold-back (its records return into a shared bucket).
func (s Status) folding() bool { return s.Into.Kind == routing.KindBucket }

// foldField is the journal's "fold" field: the target bucket of a fold-back, "" otherwise.
func (s Status) foldField() string {
	if !s.folding() {
		return ""
	}
	return strconv.FormatUint(uint64(s.Into.Bucket), 10)
}

// extraLocks are the units whose locks the migration holds besides lockUnit's: the bucket
// of a fold-back.
func (s Status) extraLocks() []routing.Unit {
	if s.folding() {
		return []routing.Unit{s.Into}
	}
	return s.splitLocks()
}

// lockKeys are the keys of the locks the migration holds besides lockKey's.
func (c *Coordinator) lockKeys(s Status) []string {
	var out []string
	for _, u := range s.extraLocks() {
		out = append(out, c.journalTag()+":lock:"+c.keys.Tag(u))
	}
	return out
}

// dstKeys are the keys of what the migration writes on the target.
func (c *Coordinator) dstKeys(r *run) routingfmt.UnitKeys {
	if r.folding() {
		return routingfmt.Keys(c.keys.Tag(r.Into))
	}
	return routingfmt.Keys(c.keys.Tag(r.Unit))
}

// tenantMatch is the HSCAN MATCH pattern of tenant's records in a bucket ("rec"), "" for
// its idempotency records ("ops"), which are told apart by value.
func tenantMatch(tenant, phase string) string {
	if phase != "rec" {
		return ""
	}
	return globEscape(routingfmt.RecordField(tenant, "")) + "*"
}

// tenantPairs filters one HSCAN page (field, value, ...) of a bucket's records ("rec") or
// idempotency records ("ops") to tenant's.
func tenantPairs(tenant, phase string, kv []string) []string {
	prefix := routingfmt.RecordField(tenant, "")
	out := kv[:0:0]
	for i := 0; i+1 < len(kv); i += 2 {
		field := kv[i]
		if phase == "ops" {
			op, err := routingfmt.DecodeOpRecord(kv[i+1])
			if err != nil {
				continue
			}
			field = op.Field
		}
		if strings.HasPrefix(field, prefix) {
			out = append(out, kv[i], kv[i+1])
		}
	}
	return out
}

// foldScript runs fold.lua on the target bucket of fold-back r, fenced by r's epoch.
func (c *Coordinator) foldScript(ctx context.Context, r *run, mode, arg string, items ...string) ([]string, error) {
	k := routingfmt.Keys(c.keys.Tag(r.Into))
	args := make([]any, 0, 6+len(items))
	args = append(args, mode, r.Unit.Tenant, r.ID, u64(r.epoch), u64(r.ImportGen), arg)
	for _, it := range items {
		args = append(args, it)
	}
	reply, err := foldScript.Run(ctx, c.shards[r.Target].c, []string{k.Own, k.Records, k.Ops, k.OpExpiry, k.Tombstones},
		args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("migrate: fold-back %s of tenant %q on target %q: %w", mode, r.Unit.Tenant, r.Target, err)
	}
	switch {
	case len(reply) == 2 && reply[0] == "fenced":
		return nil, c.fenced(r, reply[1], "target "+r.Target)
	case len(reply) == 4 && reply[0] == "unready":
		return reply, fmt.Errorf("%w: target %q holds tenant %q in %s without the note of this fold-back's verified copy (restored to an earlier point?)",
			errNotVerified, r.Target, r.Unit.Tenant, r.Into)
	case len(reply) == 4 && reply[0] == "changed":
		return reply, fmt.Errorf("%w: target %q holds %s at generation %s state %q (tenant %q marked by %q), expected open at %d with the tenant marked by this fold-back",
			ErrOwnershipChanged, r.Target, r.Into, reply[1], reply[2], r.Unit.Tenant, reply[3], r.ImportGen)
	case len(reply) >= 2 && (reply[0] == "ok" || reply[0] == "conflict" || reply[0] == "foreign"):
		return reply, nil
	}
	return nil, fmt.Errorf("migrate: fold-back %s on target %q: malformed reply %q", mode, r.Target, reply)
}

// foldPrepare is prepare for a fold-back: "prepare" marks the tenant in the bucket for this
// fold-back and deletes what an earlier era left of the tenant there; "reset" and "abandon"
// delete the tenant's items from the bucket (the mark stays: the tenant is still
// overridden); "floor" raises the bucket's version floor; "ready" notes the verified copy
// (the flip opens the tenant in the bucket only with that note).
func (c *Coordinator) foldPrepare(ctx context.Context, r *run, mode string, floor ...string) error {
	var err error
	switch mode {
	case "prepare":
		if _, err = c.foldScript(ctx, r, "claim", "-"); err == nil {
			err = c.foldWipe(ctx, r)
		}
	case "reset", "abandon":
		err = c.foldWipe(ctx, r)
	case "floor":
		if len(floor) != 1 {
			return fmt.Errorf("migrate: fold-back floor needs one value")
		}
		_, err = c.foldScript(ctx, r, "floor", floor[0])
	case "ready":
		_, err = c.foldScript(ctx, r, "ready", "-")
	default:
		return fmt.Errorf("migrate: fold-back has no prepare mode %q", mode)
	}
	if errors.Is(err, ErrOwnershipChanged) && mode != "abandon" {
		return abortf(false, err)
	}
	if errors.Is(err, ErrOwnershipChanged) {
		// The bucket is not open as it was, or another migration holds the tenant's
		// mark: nothing of this fold-back can be deleted by it any more.
		return nil
	}
	return err
}

// foldWipe deletes the tenant's records, tombstones and idempotency records from the target
// bucket, page by page, while this fold-back holds the tenant's mark there. It first runs
// one wipe of nothing, which raises the bucket's fence for the tenant (xf) to r's epoch
// whatever the scan then finds: a cancel fences a paused driver of the fold-back before it
// looks, so that driver's next batch is refused even when the bucket holds nothing to
// delete.
func (c *Coordinator) foldWipe(ctx context.Context, r *run) error {
	if reply, err := c.foldScript(ctx, r, "wipe", "-"); err != nil || reply[1] == "-1" {
		return err
	}
	b := c.shards[r.Target]
	k := routingfmt.Keys(c.keys.Tag(r.Into))
	for _, phase := range []string{"rec", "ops"} {
		key, kind := k.Records, "r"
		if phase == "ops" {
			key, kind = k.Ops, "o"
		}
		var cur uint64
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			kv, next, err := bound.Do2(ctx, func() ([]string, uint64, error) {
				return b.c.HScan(ctx, key, cur, tenantMatch(r.Unit.Tenant, phase), int64(c.o.BatchSize)).Result()
			})
			if err != nil {
				return fmt.Errorf("migrate: fold-back wipe scan on target %q: %w", r.Target, err)
			}
			kv = tenantPairs(r.Unit.Tenant, phase, kv)
			if len(kv) > 0 {
				items := make([]string, 0, len(kv))
				for i := 0; i+1 < len(kv); i += 2 {
					items = append(items, kind, kv[i])
				}
				reply, err := c.foldScript(ctx, r, "wipe", "-", items...)
				if err != nil {
					return err
				}
				if reply[1] == "-1" {
					// The mark is not this fold-back's (never taken, or taken by another
					// migration since): nothing here is this fold-back's to delete.
					return nil
				}
			}
			if cur = next; cur == 0 {
				break
			}
		}
	}
	return nil
}

// foldApply is apply for a fold-back: the items are written into the bucket, only while
// this fold-back holds the tenant's mark there.
func (c *Coordinator) foldApply(ctx context.Context, r *run, items []item) (written, skipped int64, err error) {
	args := make([]string, 0, 4*len(items))
	for _, it := range items {
		args = append(args, string(it.kind), it.field, it.value, i64(max(it.exp, 0)))
	}
	reply, err := c.foldScript(ctx, r, "apply", ms(c.o.Clock()), args...)
	switch {
	case errors.Is(err, ErrOwnershipChanged):
		s, lerr := c.load(ctx, r.ID)
		if lerr == nil && (s.State == Cancelling || s.State.Terminal()) {
			return 0, 0, &stateError{id: r.ID, found: s.State, want: []State{r.State}}
		}
		return 0, 0, abortf(true, err)
	case err != nil:
		return 0, 0, err
	case len(reply) == 5 && reply[0] == "conflict":
		kind := "record"
		if reply[1] == "o" {
			kind = "op"
		}
		c.stats.conflicts.Add(1)
		return 0, 0, abortf(true, &ConflictError{Kind: kind, Field: reply[2], Stored: reply[3], Incoming: reply[4]})
	case len(reply) == 2 && reply[0] == "foreign":
		return 0, 0, abortf(true, fmt.Errorf("%w: the unit of tenant %q holds %q, which is not the tenant's",
			ErrConflict, r.Unit.Tenant, reply[1]))
	case len(reply) == 2 && reply[0] == "ok":
		w, _ := strconv.ParseInt(reply[1], 10, 64)
		s := int64(len(items)) - w
		c.stats.refused.Add(s)
		return w, s, nil
	}
	return 0, 0, fmt.Errorf("migrate: fold-back apply on target %q: malformed reply %q", r.Target, reply)
}

// foldFlip is flip (ReadyB) for a fold-back: remove the tenant's mark from the bucket (the
// source unit was closed at the barrier, so the bucket is the tenant's only open owner from
// here), then publish a table without the override by compare-and-set, guarded by the
// driver's epoch, retrying when another table was published in between.
func (c *Coordinator) foldFlip(ctx context.Context, r *run) error {
	opened := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := c.store.Load(ctx)
		if err != nil {
			return fmt.Errorf("migrate: flip: %w", err)
		}
		owner, err := foldFlipOwner(t, r.Status)
		if err != nil {
			return err
		}
		if !opened {
			if _, err := c.foldScript(ctx, r, "open", "-"); err != nil {
				switch {
				case errors.Is(err, errNotVerified):
					// The note of the verified copy was written before ReadyB and only a
					// claim or a wipe removes it: the bucket lost it (restored from an
					// earlier backup), and with it maybe copied records. The fold-back
					// aborts instead of opening the tenant there (no table names the
					// bucket for it yet), reopening the source.
					return abortf(true, fmt.Errorf("%w; the fold-back stops before opening it", err))
				case errors.Is(err, ErrFenced):
					return err
				}
				return fmt.Errorf("migrate: open the tenant in its bucket: %w", err)
			}
			opened = true
		}
		gen := t.Generation
		if owner == r.Source {
			nt := t.Next()
			nt.SetOverride(r.Unit.Tenant, "")
			again, err := c.publishGuarded(ctx, r, nt)
			if err != nil {
				return err
			}
			if again {
				continue
			}
			gen = nt.Generation
		}
		return c.flipped(ctx, r, gen)
	}
}

// foldFlipOwner returns the shard table t overrides s's tenant onto ("" once the override
// is gone), which must be the source, and checks that t still assigns the tenant's bucket
// to the target. It is pure.
func foldFlipOwner(t *routing.Table, s Status) (string, error) {
	owner := t.Overrides[s.Unit.Tenant]
	if owner != s.Source && owner != "" {
		return "", fmt.Errorf("%w: table generation %d overrides tenant %q onto %q during the fold-back's flip",
			ErrOwnershipChanged, t.Generation, s.Unit.Tenant, owner)
	}
	if bo := t.BucketOwner(s.Into.Bucket); bo != s.Target {
		return "", fmt.Errorf("%w: table generation %d assigns %s to %q during the fold-back's flip",
			ErrOwnershipChanged, t.Generation, s.Into, bo)
	}
	return owner, nil
}
