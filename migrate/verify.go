package migrate

import (
	"context"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"maps"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Digest summarises one side of a unit: live records, tombstones and idempotency records,
// and an order-independent sum of xxhash64 over every item's field and stored form (so it
// covers keys, versions, tombstones and values; equal counts with one record replaced by
// another give different sums). Expired tombstones and op records are left out.
type Digest struct {
	Records    int64  // Records counts live records.
	Tombstones int64  // Tombstones counts tombstones.
	Ops        int64  // Ops counts idempotency records.
	Sum        uint64 // Sum is the wrapping sum of the items' hashes.
}

// String returns "records=… tombstones=… ops=… sum=…".
func (d Digest) String() string {
	return fmt.Sprintf("records=%d tombstones=%d ops=%d sum=%016x", d.Records, d.Tombstones, d.Ops, d.Sum)
}

// verifier compares the unit on source and target. A pass scans both sides in batches and
// compares each batch field by field with the other side; the source may take writes
// meanwhile. Every item that differed, and every item the source's log touches after the
// pass started, is dirty and re-read on both sides under the barrier (finish), unless refine
// found it held by one side only and expired there before the barrier: an item that
// was equal during the pass and not written since is still equal, because the target only
// ever takes strictly newer versions. So the pause pays for what changed, not for the unit's
// size.
type verifier struct {
	id    string
	pos   string // source log position up to which every entry touched the verifier
	seen  string // seen is the last log entry that touched the verifier (at least pos)
	snaps int    // snaps is the migration's snapshot count when the pass ran
	a, b  *side  // the source's and the target's items
	dirty map[string]bool
}

// side holds one side's items (key "r"+field or "o"+op ID -> stored form, "" = absent) and
// their digest, kept up to date as items change so that finishing costs O(dirty items).
type side struct {
	m map[string]string
	d Digest
}

func newSide() *side { return &side{m: map[string]string{}} }

func (s *side) get(key string) string { return s.m[key] }

// set stores an item's stored form and adjusts the digest.
func (s *side) set(key, val string) {
	if old := s.m[key]; old != "" {
		s.d.add(key, old, -1)
	}
	s.m[key] = val
	if val != "" {
		s.d.add(key, val, 1)
	}
}

// add counts (sign 1) or uncounts (sign -1) one item.
func (d *Digest) add(key, val string, sign int64) {
	switch {
	case key[0] == 'o':
		d.Ops += sign
	case isTombstone(val):
		d.Tombstones += sign
	default:
		d.Records += sign
	}
	var h xxhash.Digest
	h.Reset()
	_, _ = h.WriteString(key)
	_, _ = h.WriteString("\x00")
	_, _ = h.WriteString(val)
	d.Sum += uint64(sign) * h.Sum64()
}

// touch marks the items of a log entry after the pass's start position as dirty.
func (v *verifier) touch(e routingfmt.LogEntry) {
	if later, err := idAfter(e.ID, v.seen); err == nil && later {
		v.seen = e.ID
	}
	if after, err := idAfter(e.ID, v.pos); err != nil || !after {
		return
	}
	if e.Kind == "put" || e.Kind == "del" {
		v.dirty["r"+e.Field] = true
	}
	v.dirty["o"+e.OpID] = true
}

// verifyPass runs one comparison pass of source and target.
func (c *Coordinator) verifyPass(ctx context.Context, r *run) (*verifier, error) {
	if r.carving() || r.folding() {
		return c.carveVerifyPass(ctx, r)
	}
	p, err := c.probe(ctx, r, "0-0", "+", 0)
	if err != nil {
		return nil, err
	}
	c.stats.verifyPasses.Add(1)
	v := &verifier{id: r.ID, pos: p.last, seen: p.last, snaps: r.Snapshots, a: newSide(), b: newSide(), dirty: map[string]bool{}}
	k := routingfmt.Keys(c.keys.Tag(r.Unit))
	a, b := c.shards[r.Source], c.shards[r.Target]
	for _, sd := range []struct {
		from, to     *shard
		mine, theirs *side
	}{{a, b, v.a, v.b}, {b, a, v.b, v.a}} {
		for _, kind := range []string{"r", "o"} {
			key := k.Records
			if kind == "o" {
				key = k.Ops
			}
			h := hashScan{from: sd.from, to: sd.to, fromKey: key, toKey: key, kind: kind, mine: sd.mine, theirs: sd.theirs}
			if err := c.verifyScan(ctx, v, h); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// hashScan is one side of a verification pass over one hash of items.
type hashScan struct {
	from, to       *shard                     // from is scanned; to is read for the same fields.
	fromKey, toKey string                     // fromKey and toKey are the hashes on from and to.
	kind           string                     // kind is "r" for records, "o" for op records.
	match          string                     // match is the HSCAN MATCH pattern ("": every field).
	keep           func(kv []string) []string // keep filters each scanned page (nil: keep all).
	mine, theirs   *side                      // mine is from's side, theirs to's.
}

// verifyScan scans h.fromKey on h.from in pages of BatchSize, records each field not seen
// yet on h.mine, reads the same fields of h.toKey on h.to into h.theirs, and marks the
// fields whose values differ as dirty.
func (c *Coordinator) verifyScan(ctx context.Context, v *verifier, h hashScan) error {
	var cur uint64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		kv, next, err := bound.Do2(ctx, func() ([]string, uint64, error) {
			return h.from.c.HScan(ctx, h.fromKey, cur, h.match, int64(c.o.BatchSize)).Result()
		})
		if err != nil {
			return fmt.Errorf("migrate: verify scan on %q: %w", h.from.name, err)
		}
		if h.keep != nil {
			kv = h.keep(kv)
		}
		if fields := h.mine.addNew(h.kind, kv); len(fields) > 0 {
			vals, err := bound.Do(ctx, func() ([]any, error) { return h.to.c.HMGet(ctx, h.toKey, fields...).Result() })
			if err != nil {
				return fmt.Errorf("migrate: verify read on %q: %w", h.to.name, err)
			}
			v.compare(h.kind, fields, vals, h.mine, h.theirs)
		}
		if cur = next; cur == 0 {
			return nil
		}
	}
}

// addNew records the pairs (field, value, ...) of one scanned page whose fields s has not
// seen yet (a scan may return a field twice) and returns those fields. It is pure.
func (s *side) addNew(kind string, kv []string) []string {
	var fields []string
	for i := 0; i+1 < len(kv); i += 2 {
		if _, seen := s.m[kind+kv[i]]; seen {
			continue
		}
		s.set(kind+kv[i], kv[i+1])
		fields = append(fields, kv[i])
	}
	return fields
}

// compare records the other side's values (vals, as HMGET returns them) of fields on
// theirs and marks each field whose value differs from mine's as dirty. It is pure.
func (v *verifier) compare(kind string, fields []string, vals []any, mine, theirs *side) {
	for i, f := range fields {
		s, _ := vals[i].(string)
		theirs.set(kind+f, s)
		if s != mine.get(kind+f) {
			v.dirty[kind+f] = true
		}
	}
}

// expirySlack is how far past the coordinator's clock an item held by one side only may
// expire and still count as expired (the shards' writers drop expired items by their own
// clocks).
const expirySlack = time.Second

// refine re-reads the dirty items on both sides while the source still takes writes, and
// forgets those that match, or that one side holds only and has expired there (see settle).
// Every log entry up to r.Applied has been read (and touched the verifier), so the pass's
// position moves there: a write after it is in the log after it and marks its item dirty
// again when read; a write before it that the target has not applied leaves the item
// different, hence still dirty. Settling expired items here, not under the barrier, keeps
// the barrier's work to the items written since: during a long copy many idempotency
// records and tombstones expire, and they never become equal.
func (c *Coordinator) refine(ctx context.Context, r *run, v *verifier) error {
	pos := r.Applied
	if err := c.reread(ctx, r, v); err != nil {
		return err
	}
	if _, err := c.settle(ctx, r, v, c.o.Clock().Add(expirySlack).UnixMilli()); err != nil {
		return err
	}
	for key := range v.dirty {
		if v.a.get(key) == v.b.get(key) {
			delete(v.dirty, key)
		}
	}
	v.pos = pos
	return nil
}

// reread reads every dirty item again on both sides.
func (c *Coordinator) reread(ctx context.Context, r *run, v *verifier) error {
	keys := slices.Sorted(maps.Keys(v.dirty))
	for _, side := range []struct {
		s *shard
		m *side
		k routingfmt.UnitKeys
	}{{c.shards[r.Source], v.a, c.srcKeys(r)}, {c.shards[r.Target], v.b, c.dstKeys(r)}} {
		for start := 0; start < len(keys); start += c.o.BatchSize {
			batch := keys[start:min(start+c.o.BatchSize, len(keys))]
			for _, kind := range []string{"r", "o"} {
				var fields []string
				for _, key := range batch {
					if key[:1] == kind {
						fields = append(fields, key[1:])
					}
				}
				if len(fields) == 0 {
					continue
				}
				hash := side.k.Records
				if kind == "o" {
					hash = side.k.Ops
				}
				vals, err := bound.Do(ctx, func() ([]any, error) { return side.s.c.HMGet(ctx, hash, fields...).Result() })
				if err != nil {
					return fmt.Errorf("migrate: verify read on %q: %w", side.s.name, err)
				}
				for i, f := range fields {
					s, _ := vals[i].(string)
					side.m.set(kind+f, s)
				}
			}
		}
	}
	return nil
}

// finish re-reads every dirty item on both sides (the source is closed now, the target has
// applied everything up to the barrier), drops expired tombstones and op records, and
// compares the digests.
func (c *Coordinator) finish(ctx context.Context, r *run, v *verifier) (Digest, error) {
	if err := c.reread(ctx, r, v); err != nil {
		return Digest{}, err
	}
	// Read the clock after the items: a side may have dropped an item it found expired by
	// its own clock just before; expirySlack absorbs small clock differences.
	now := c.o.Clock().Add(expirySlack).UnixMilli()
	// Items present on one side only are fine if they expired there (retention removes
	// them lazily, and never through the log).
	differ, err := c.settle(ctx, r, v, now)
	if err != nil {
		return Digest{}, err
	}
	da, db := v.a.d, v.b.d
	if len(differ) > 0 || da != db {
		c.stats.verifyFailures.Add(1)
		return da, abortf(true, &VerifyError{Source: da, Target: db, Differ: differ[:min(len(differ), 10)]})
	}
	return da, nil
}

// keep holds the verifier of a drive that stopped with an error, so that the next drive of
// the migration in this process (a Resume after a lost reply) continues from it instead of
// starting a full pass again.
func (c *Coordinator) keep(r *run) {
	if r.ver == nil || r.ver.id != r.ID || (r.State != CatchingUp && r.State != ClosedA) {
		return
	}
	c.vmu.Lock()
	defer c.vmu.Unlock()
	if c.kept == nil {
		c.kept = map[string]*verifier{}
	}
	c.kept[r.ID] = r.ver
}

// resumeVerifier hands a kept verifier to r if it is still exact for the journal record r
// holds: same migration, no snapshot restart since its pass (the target is not reset), and
// every log entry the target has applied after the pass's position touched it (another
// driver may have applied entries it never saw; then a full pass runs again). Otherwise
// the verifier is dropped. A verifier is handed out once, so two drives never share it.
func (c *Coordinator) resumeVerifier(r *run) {
	c.vmu.Lock()
	v := c.kept[r.ID]
	delete(c.kept, r.ID)
	c.vmu.Unlock()
	if v == nil || v.snaps != r.Snapshots || (r.State != CatchingUp && r.State != ClosedA) {
		return
	}
	if r.Applied != "" {
		if beyond, err := idAfter(r.Applied, v.seen); err != nil || beyond {
			return
		}
	}
	c.stats.verifyResumed.Add(1)
	r.ver = v
}
