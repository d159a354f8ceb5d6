package migrate

import (
	"context"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"maps"
	"slices"
)

// holder is one unit on one shard that holds a side of a split: a source or a target.
type holder struct {
	sh *shard
	k  routingfmt.UnitKeys
}

// splitHolders returns a split's sources (by lane) and targets (by sub-bucket).
func (c *Coordinator) splitHolders(r *run) (src, dst []holder) {
	for _, l := range r.lanes {
		src = append(src, holder{c.shards[l.shard], routingfmt.Keys(c.keys.Tag(l.unit))})
	}
	for j, name := range r.SplitTo {
		dst = append(dst, holder{c.shards[name], routingfmt.Keys(c.keys.Tag(targetUnit(r.Unit.Tenant, len(r.SplitTo), j)))})
	}
	return src, dst
}

// hashOf is the hash of kind "r" (records) or "o" (idempotency records) in h.
func (h holder) hashOf(kind string) string {
	if kind == "o" {
		return h.k.Ops
	}
	return h.k.Records
}

// zsetOf is the expiry set of an item of kind "r" (tombstones) or "o" in h.
func (h holder) zsetOf(kind string) string {
	if kind == "o" {
		return h.k.OpExpiry
	}
	return h.k.Tombstones
}

// misplaced is the verification error of an item a target holds that belongs to another
// sub-bucket (or to no record of the tenant).
func misplaced(v *verifier, field string) error {
	return abortf(true, &VerifyError{Source: v.a.d, Target: v.b.d, Differ: []string{field}})
}

// splitVerifyPass runs one comparison pass of a split: every source's items against the
// target sub-bucket each goes to, then every target's items against the source each came
// from. A target item that belongs to another sub-bucket fails the verification. Every log
// entry applied after the pass marks its items dirty (the sources' logs have no common
// position), so the barrier re-reads what changed since.
func (c *Coordinator) splitVerifyPass(ctx context.Context, r *run) (*verifier, error) {
	c.stats.verifyPasses.Add(1)
	v := &verifier{id: r.ID, pos: "0-0", seen: "0-0", snaps: r.Snapshots, a: newSide(), b: newSide(), dirty: map[string]bool{}}
	src, dst := c.splitHolders(r)
	for _, p := range []splitPass{{src, dst, v.a, v.b, false}, {dst, src, v.b, v.a, true}} {
		for fi := range p.from {
			for _, kind := range []string{"r", "o"} {
				if err := c.splitScan(ctx, r.Unit.Tenant, v, p, fi, kind); err != nil {
					return nil, err
				}
			}
		}
	}
	return v, nil
}

// splitPass is one direction of a split's verification pass: the items of the holders
// from (on side mine) against the holders to (on side theirs). On the targets' pass
// (target), from are the targets, by sub-bucket.
type splitPass struct {
	from, to     []holder
	mine, theirs *side
	target       bool
}

// splitScan scans the items of kind ("r" or "o") of holder p.from[fi] in batches: each
// batch's new items are recorded on p.mine (see group), then read from the holder of p.to
// each goes to and compared (an item that differs becomes dirty on v).
func (c *Coordinator) splitScan(ctx context.Context, tenant string, v *verifier, p splitPass, fi int, kind string) error {
	from := p.from[fi]
	var cur uint64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		kv, next, err := bound.Do2(ctx, func() ([]string, uint64, error) {
			return from.sh.c.HScan(ctx, from.hashOf(kind), cur, "", int64(c.o.BatchSize)).Result()
		})
		if err != nil {
			return fmt.Errorf("migrate: verify scan on %q: %w", from.sh.name, err)
		}
		groups, bad, ok := p.group(tenant, kind, fi, kv)
		if !ok {
			return misplaced(v, bad)
		}
		for _, sub := range slices.Sorted(maps.Keys(groups)) {
			to := p.to[sub]
			vals, err := bound.Do(ctx, func() ([]any, error) { return to.sh.c.HMGet(ctx, to.hashOf(kind), groups[sub]...).Result() })
			if err != nil {
				return fmt.Errorf("migrate: verify read on %q: %w", to.sh.name, err)
			}
			v.compare(kind, groups[sub], vals, p.mine, p.theirs)
		}
		if cur = next; cur == 0 {
			return nil
		}
	}
}

// group is the pure planning step of one scanned batch kv (field, value pairs of kind) of
// holder p.from[fi]: it records every item not seen before on p.mine and groups its field
// by the sub-bucket of p.to it goes to. An op record naming no field does not travel, and
// a record of another tenant in a source is not this split's: both are skipped. On the
// targets' pass, an item that belongs to another sub-bucket than fi (or to none) stops
// the step: its field is returned as misplaced, with ok false.
func (p splitPass) group(tenant, kind string, fi int, kv []string) (groups map[int][]string, misplaced string, ok bool) {
	groups = map[int][]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		f, val := kv[i], kv[i+1]
		sub, travels := itemSub(tenant, kind[0], f, val, len(p.to))
		if p.target {
			if own, mine := itemSub(tenant, kind[0], f, val, len(p.from)); !mine || own != fi {
				return nil, f, false
			}
		}
		if !travels {
			continue
		}
		if _, seen := p.mine.m[kind+f]; seen {
			continue
		}
		p.mine.set(kind+f, val)
		groups[sub] = append(groups[sub], f)
	}
	return groups, "", true
}

// splitFinish is finish for a split: re-read every dirty item on both sides (the sources
// are closed, the targets applied every log up to its barrier), settle the items one side
// holds only that expired there, and compare the digests.
func (c *Coordinator) splitFinish(ctx context.Context, r *run, v *verifier) (Digest, error) {
	keys := slices.Sorted(maps.Keys(v.dirty))
	where, err := c.splitReread(ctx, r, v, keys)
	if err != nil {
		return Digest{}, err
	}
	now := c.o.Clock().Add(expirySlack).UnixMilli()
	opCut := now
	if c.o.OpRetryWindow < c.o.OpRetention {
		opCut = max(now, c.opCutoff())
	}
	groups, differ := planSplitSettle(keys, v.a, v.b, where, now, opCut)
	live, err := c.splitSettle(ctx, v, groups)
	if err != nil {
		return Digest{}, err
	}
	differ = append(differ, live...)
	slices.Sort(differ)
	da, db := v.a.d, v.b.d
	if len(differ) > 0 || da != db {
		c.stats.verifyFailures.Add(1)
		return da, abortf(true, &VerifyError{Source: da, Target: db, Differ: differ[:min(len(differ), 10)]})
	}
	return da, nil
}

// splitReread reads every key of keys (v's dirty items, sorted) again on both sides of a
// split, in batches, and stores the values on v.a (sources) and v.b (targets). It returns,
// for each key, the source (index 0) and the target (index 1) holder it was read at: the
// one that holds it, else the first one asked.
func (c *Coordinator) splitReread(ctx context.Context, r *run, v *verifier, keys []string) (map[string][2]*holder, error) {
	src, dst := c.splitHolders(r)
	where := map[string][2]*holder{}
	for start := 0; start < len(keys); start += c.o.BatchSize {
		batch := keys[start:min(start+c.o.BatchSize, len(keys))]
		for si, sd := range []struct {
			hs []holder
			m  *side
		}{{src, v.a}, {dst, v.b}} {
			ask := splitAsk(r.Unit.Tenant, batch, len(sd.hs))
			found := map[string]string{}
			for _, h := range slices.Sorted(maps.Keys(ask)) {
				if err := c.splitReadAt(ctx, &sd.hs[h], si, ask[h], where, found); err != nil {
					return nil, err
				}
			}
			for _, key := range batch {
				sd.m.set(key, found[key])
			}
		}
	}
	return where, nil
}

// splitAsk is the pure plan of one side's re-read: for each index of its n holders, the
// keys of batch to read there. A record goes to the sub-bucket its field hashes to (none
// when the field is not tenant's); an op record's holder follows the field it names, which
// the dirty key does not carry, so every holder is asked.
func splitAsk(tenant string, batch []string, n int) map[int][]string {
	ask := map[int][]string{}
	for _, key := range batch {
		if key[0] == 'r' {
			if sub, ok := splitSub(tenant, key[1:], n); ok {
				ask[sub] = append(ask[sub], key)
			}
			continue
		}
		for h := range n {
			ask[h] = append(ask[h], key)
		}
	}
	return ask
}

// kindFields returns the fields of the keys of kind ("r" or "o") among keys, in order. It
// is pure.
func kindFields(keys []string, kind string) []string {
	var fields []string
	for _, key := range keys {
		if key[:1] == kind {
			fields = append(fields, key[1:])
		}
	}
	return fields
}

// splitReadAt reads keys at holder h of side si (0 sources, 1 targets): the values found
// go to found, and where[key][si] becomes h if h holds the key or no holder of that side
// was recorded for it yet.
func (c *Coordinator) splitReadAt(ctx context.Context, h *holder, si int, keys []string, where map[string][2]*holder, found map[string]string) error {
	for _, kind := range []string{"r", "o"} {
		fields := kindFields(keys, kind)
		if len(fields) == 0 {
			continue
		}
		vals, err := bound.Do(ctx, func() ([]any, error) { return h.sh.c.HMGet(ctx, h.hashOf(kind), fields...).Result() })
		if err != nil {
			return fmt.Errorf("migrate: verify read on %q: %w", h.sh.name, err)
		}
		for i, f := range fields {
			s, _ := vals[i].(string)
			key := kind + f
			w := where[key]
			if s != "" || w[si] == nil {
				w[si] = h
				where[key] = w
			}
			if s != "" {
				found[key] = s
			}
		}
	}
	return nil
}

// expiryGroup is a set of items one holder holds alone: each is settled (dropped from
// both sides) if holder h's expiry set zset gives it an expiry at or before limit (Unix
// ms), and is a difference otherwise.
type expiryGroup struct {
	h     *holder
	zset  string
	limit int64
	keys  []string
}

// planSplitSettle is splitFinish's pure settling plan over keys (sorted) and the sides a
// (sources) and b (targets) after the re-read, with where from splitReread. A key whose
// sides are equal is fine. A key both sides hold, one with no holder read, or a live
// record one side holds alone, is a difference. Every other key (a tombstone or an op
// record one side holds alone) joins the expiry group of its holder and expiry set, with
// limit now, or opCut for an op record the source holds alone. It returns the groups in
// order of their holder's side, shard name and set, and the differences.
func planSplitSettle(keys []string, a, b *side, where map[string][2]*holder, now, opCut int64) ([]*expiryGroup, []string) {
	groups := map[string]*expiryGroup{}
	var differ []string
	for _, key := range keys {
		va, vb := a.get(key), b.get(key)
		if va == vb {
			continue
		}
		si, held, limit := 0, va, opCut
		if va == "" {
			si, held, limit = 1, vb, now
		}
		h := where[key][si]
		if (va != "" && vb != "") || h == nil || (key[0] == 'r' && !isTombstone(held)) {
			differ = append(differ, key[1:])
			continue
		}
		if key[0] == 'r' {
			limit = now
		}
		z := h.zsetOf(key[:1])
		gk := fmt.Sprint(si, h.sh.name, z)
		if groups[gk] == nil {
			groups[gk] = &expiryGroup{h: h, zset: z, limit: limit}
		}
		groups[gk].keys = append(groups[gk].keys, key)
	}
	out := make([]*expiryGroup, 0, len(groups))
	for _, gk := range slices.Sorted(maps.Keys(groups)) {
		out = append(out, groups[gk])
	}
	return out, differ
}

// splitSettle reads the expiry of every item of groups at its holder, in batches: an item
// that expired by its group's limit is dropped from both sides of v; the others are
// returned as differences.
func (c *Coordinator) splitSettle(ctx context.Context, v *verifier, groups []*expiryGroup) ([]string, error) {
	var differ []string
	for _, g := range groups {
		for start := 0; start < len(g.keys); start += c.o.BatchSize {
			batch := g.keys[start:min(start+c.o.BatchSize, len(g.keys))]
			members := make([]string, len(batch))
			for i, key := range batch {
				members[i] = key[1:]
			}
			sc, err := g.h.sh.c.ZMScore(ctx, g.zset, members...).Result()
			if err != nil {
				return nil, fmt.Errorf("migrate: verify expiry on %q: %w", g.h.sh.name, err)
			}
			for i, key := range batch {
				if i < len(sc) && sc[i] > 0 && int64(sc[i]) <= g.limit {
					v.a.set(key, "")
					v.b.set(key, "")
					continue
				}
				differ = append(differ, key[1:])
			}
		}
	}
	return differ, nil
}
