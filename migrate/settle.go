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
	k, ks := c.dstKeys(r), c.srcKeys(r)
	// An idempotency record held by the source only that was written before the retry
	// window is not moved (see snapshotItems): it counts as settled like an expired one.
	opCut := now
	if c.o.OpRetryWindow < c.o.OpRetention {
		opCut = max(now, c.opCutoff())
	}
	groups := [4]settleGroup{
		{c.shards[r.Source], ks.OpExpiry, opCut}, {c.shards[r.Source], ks.Tombstones, now},
		{c.shards[r.Target], k.OpExpiry, now}, {c.shards[r.Target], k.Tombstones, now},
	}
	held, differ := classifySettle(v)
	for gi, g := range groups {
		d, err := c.settleGroup(ctx, g, held[gi], v)
		if err != nil {
			return nil, err
		}
		differ = append(differ, d...)
	}
	slices.Sort(differ)
	return differ, nil
}

// settleGroup is where one group of one-side-only items keeps its expiries: the holding
// shard, its expiry set, and the time (unix ms) by which an item must have expired.
type settleGroup struct {
	holder *shard
	zset   string
	limit  int64
}

// classifySettle sorts v's dirty items that differ between the sides into those both sides
// hold (differ, by field) and, per settleGroup (source op records, source tombstones,
// target op records, target tombstones), those one side holds only and that count as
// settled once expired (held, by key). A live record one side holds only differs. It is
// pure.
func classifySettle(v *verifier) (held [4][]string, differ []string) {
	for key := range v.dirty {
		a, b := v.a.get(key), v.b.get(key)
		if a == b {
			continue
		}
		one, g := a, 0
		if a == "" {
			one, g = b, 2
		}
		switch {
		case a != "" && b != "":
			differ = append(differ, key[1:])
		case key[0] == 'o':
			held[g] = append(held[g], key)
		case isTombstone(one):
			held[g+1] = append(held[g+1], key)
		default:
			differ = append(differ, key[1:])
		}
	}
	return held, differ
}

// settleGroup reads the expiries of keys (one group's one-side-only items) in batches of
// BatchSize, drops each item that has expired by g.limit from both sides' digests, and
// returns the fields of the others.
func (c *Coordinator) settleGroup(ctx context.Context, g settleGroup, keys []string, v *verifier) ([]string, error) {
	var differ []string
	slices.Sort(keys)
	for start := 0; start < len(keys); start += c.o.BatchSize {
		batch := keys[start:min(start+c.o.BatchSize, len(keys))]
		members := make([]string, len(batch))
		for i, key := range batch {
			members[i] = key[1:]
		}
		sc, err := g.holder.c.ZMScore(ctx, g.zset, members...).Result()
		if err != nil {
			return nil, fmt.Errorf("migrate: verify expiry on %q: %w", g.holder.name, err)
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
	return differ, nil
}
