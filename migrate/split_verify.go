package migrate

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/celebrity-go/celebrity/routing"
)

// holder is one unit on one shard that holds a side of a split: a source or a target.
type holder struct {
	sh *shard
	k  routing.UnitKeys
}

// splitHolders returns a split's sources (by lane) and targets (by sub-bucket).
func (c *Coordinator) splitHolders(r *run) (src, dst []holder) {
	for _, l := range r.lanes {
		src = append(src, holder{c.shards[l.shard], c.keys.Unit(l.unit)})
	}
	for j, name := range r.SplitTo {
		dst = append(dst, holder{c.shards[name], c.keys.Unit(routing.SpreadUnit(r.Unit.Tenant, uint32(j)))})
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
	tenant := r.Unit.Tenant
	for _, pass := range []struct {
		from, to     []holder
		mine, theirs *side
		target       bool
	}{{src, dst, v.a, v.b, false}, {dst, src, v.b, v.a, true}} {
		for fi, from := range pass.from {
			for _, kind := range []string{"r", "o"} {
				var cur uint64
				for {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
					kv, next, err := from.sh.c.HScan(ctx, from.hashOf(kind), cur, "", int64(c.o.BatchSize)).Result()
					if err != nil {
						return nil, fmt.Errorf("migrate: verify scan on %q: %w", from.sh.name, err)
					}
					groups := map[int][]string{}
					for i := 0; i+1 < len(kv); i += 2 {
						f, val := kv[i], kv[i+1]
						sub, ok := itemSub(tenant, kind[0], f, val, len(pass.to))
						if pass.target {
							if own, ok2 := itemSub(tenant, kind[0], f, val, len(dst)); !ok2 || own != fi {
								return nil, misplaced(v, f)
							}
						}
						if !ok {
							// An op record naming no field does not travel; a record of
							// another tenant in a source is not this split's.
							continue
						}
						if _, seen := pass.mine.m[kind+f]; seen {
							continue
						}
						pass.mine.set(kind+f, val)
						groups[sub] = append(groups[sub], f)
					}
					for _, sub := range slices.Sorted(maps.Keys(groups)) {
						fields := groups[sub]
						to := pass.to[sub]
						vals, err := to.sh.c.HMGet(ctx, to.hashOf(kind), fields...).Result()
						if err != nil {
							return nil, fmt.Errorf("migrate: verify read on %q: %w", to.sh.name, err)
						}
						for i, f := range fields {
							s, _ := vals[i].(string)
							pass.theirs.set(kind+f, s)
							if s != pass.mine.get(kind+f) {
								v.dirty[kind+f] = true
							}
						}
					}
					if cur = next; cur == 0 {
						break
					}
				}
			}
		}
	}
	return v, nil
}

// splitFinish is finish for a split: re-read every dirty item on both sides (the sources
// are closed, the targets applied every log up to its barrier), settle the items one side
// holds only that expired there, and compare the digests.
func (c *Coordinator) splitFinish(ctx context.Context, r *run, v *verifier) (Digest, error) {
	src, dst := c.splitHolders(r)
	where := map[string][2]*holder{} // key -> the source and target that were read for it
	keys := slices.Sorted(maps.Keys(v.dirty))
	tenant := r.Unit.Tenant
	for start := 0; start < len(keys); start += c.o.BatchSize {
		batch := keys[start:min(start+c.o.BatchSize, len(keys))]
		for si, sd := range []struct {
			hs []holder
			m  *side
		}{{src, v.a}, {dst, v.b}} {
			ask := map[int][]string{} // holder index -> keys
			for _, key := range batch {
				if key[0] == 'r' {
					sub, ok := splitSub(tenant, key[1:], len(sd.hs))
					if !ok {
						continue
					}
					ask[sub] = append(ask[sub], key)
					continue
				}
				// An op record's holder follows the field it names, which the dirty
				// key does not carry: ask every holder.
				for h := range sd.hs {
					ask[h] = append(ask[h], key)
				}
			}
			found := map[string]string{}
			for _, h := range slices.Sorted(maps.Keys(ask)) {
				for _, kind := range []string{"r", "o"} {
					var fields []string
					for _, key := range ask[h] {
						if key[:1] == kind {
							fields = append(fields, key[1:])
						}
					}
					if len(fields) == 0 {
						continue
					}
					vals, err := sd.hs[h].sh.c.HMGet(ctx, sd.hs[h].hashOf(kind), fields...).Result()
					if err != nil {
						return Digest{}, fmt.Errorf("migrate: verify read on %q: %w", sd.hs[h].sh.name, err)
					}
					for i, f := range fields {
						s, _ := vals[i].(string)
						key := kind + f
						w := where[key]
						if s != "" || w[si] == nil {
							w[si] = &sd.hs[h]
							where[key] = w
						}
						if s != "" {
							found[key] = s
						}
					}
				}
			}
			for _, key := range batch {
				sd.m.set(key, found[key])
			}
		}
	}
	now := c.o.Clock().Add(expirySlack).UnixMilli()
	opCut := now
	if c.o.OpRetryWindow < c.o.OpRetention {
		opCut = max(now, c.opCutoff())
	}
	type group struct {
		h     *holder
		zset  string
		limit int64
		keys  []string
	}
	groups := map[string]*group{}
	var differ []string
	for _, key := range keys {
		a, b := v.a.get(key), v.b.get(key)
		if a == b {
			continue
		}
		side, held, limit := 0, a, opCut
		if a == "" {
			side, held, limit = 1, b, now
		}
		h := where[key][side]
		if (a != "" && b != "") || h == nil || (key[0] == 'r' && !isTombstone(held)) {
			differ = append(differ, key[1:])
			continue
		}
		if key[0] == 'r' {
			limit = now
		}
		z := h.zsetOf(key[:1])
		gk := fmt.Sprint(side, h.sh.name, z)
		g := groups[gk]
		if g == nil {
			g = &group{h: h, zset: z, limit: limit}
			groups[gk] = g
		}
		g.keys = append(g.keys, key)
	}
	for _, gk := range slices.Sorted(maps.Keys(groups)) {
		g := groups[gk]
		for start := 0; start < len(g.keys); start += c.o.BatchSize {
			batch := g.keys[start:min(start+c.o.BatchSize, len(g.keys))]
			members := make([]string, len(batch))
			for i, key := range batch {
				members[i] = key[1:]
			}
			sc, err := g.h.sh.c.ZMScore(ctx, g.zset, members...).Result()
			if err != nil {
				return Digest{}, fmt.Errorf("migrate: verify expiry on %q: %w", g.h.sh.name, err)
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
	slices.Sort(differ)
	da, db := v.a.d, v.b.d
	if len(differ) > 0 || da != db {
		c.stats.verifyFailures.Add(1)
		return da, abortf(true, &VerifyError{Source: da, Target: db, Differ: differ[:min(len(differ), 10)]})
	}
	return da, nil
}
