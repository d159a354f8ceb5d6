package migrate

import (
	"context"
	"fmt"
	"slices"
)

// settle looks at the dirty items that still differ between the sides. An item held by one
// side only that has expired there by now (unix ms; an idempotency record, or a tombstone)
// is dropped from both sides' digests; every other differing item is returned, sorted by
// field. The expiries are read in batches, one ZMSCORE per holding side, expiry set and
// BatchSize items, so the cost in round trips does not grow with the number of expired
// items.
func (c *Coordinator) settle(ctx context.Context, r *run, v *verifier, now int64) ([]string, error) {
	type group struct {
		holder *shard
		zset   string
		keys   []string
	}
	k, ks := c.dstKeys(r), c.srcKeys(r)
	groups := []*group{
		{c.shards[r.Source], ks.OpExpiry, nil}, {c.shards[r.Source], ks.Tombstones, nil},
		{c.shards[r.Target], k.OpExpiry, nil}, {c.shards[r.Target], k.Tombstones, nil},
	}
	// An idempotency record held by the source only that was written before the retry
	// window is not moved (see snapshotItems): it counts as settled like an expired one.
	opCut := now
	if c.o.OpRetryWindow < c.o.OpRetention {
		opCut = max(now, c.opCutoff())
	}
	limits := []int64{opCut, now, now, now}
	var differ []string
	for key := range v.dirty {
		a, b := v.a.get(key), v.b.get(key)
		if a == b {
			continue
		}
		held, g := a, 0
		if a == "" {
			held, g = b, 2
		}
		switch {
		case a != "" && b != "":
			differ = append(differ, key[1:])
		case key[0] == 'o':
			groups[g].keys = append(groups[g].keys, key)
		case isTombstone(held):
			groups[g+1].keys = append(groups[g+1].keys, key)
		default:
			differ = append(differ, key[1:])
		}
	}
	for gi, g := range groups {
		slices.Sort(g.keys)
		for start := 0; start < len(g.keys); start += c.o.BatchSize {
			batch := g.keys[start:min(start+c.o.BatchSize, len(g.keys))]
			members := make([]string, len(batch))
			for i, key := range batch {
				members[i] = key[1:]
			}
			sc, err := g.holder.c.ZMScore(ctx, g.zset, members...).Result()
			if err != nil {
				return nil, fmt.Errorf("migrate: verify expiry on %q: %w", g.holder.name, err)
			}
			for i, key := range batch {
				if i < len(sc) && sc[i] > 0 && int64(sc[i]) <= limits[gi] {
					v.a.set(key, "")
					v.b.set(key, "")
					continue
				}
				differ = append(differ, key[1:])
			}
		}
	}
	slices.Sort(differ)
	return differ, nil
}
