package replicas

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Get returns key's value and version.
//
// A key that is not hot on this instance costs one GET of its primary record, nothing more.
// A hot key is read from one copy (at random, or this instance's copy with
// Options.Affinity); when that copy fails it tries the next ones, and when a copy is empty or
// expired it reads the primary record instead, registering and refilling that copy before
// Get returns. Get returns ErrNotFound when the record it reads holds no live value (a live
// tombstone in a copy means deleted). With every copy failing and the primary unreachable,
// Get returns the last error. Expiries are compared with Options.Clock.
func (r *Replicator) Get(ctx context.Context, key string) (Item, error) {
	if key == "" {
		return Item{}, errEmptyKey
	}
	var lay *layout
	var missed []int
	if r.IsHot(key) {
		if l, err := r.layoutFor(ctx, key); err == nil {
			// Without a slot map, the primary still answers.
			lay = l
			it, done, m, err := r.readCopies(ctx, key, lay)
			if done {
				return it, err
			}
			missed = m
		}
	}
	if len(missed) == 0 {
		return r.readPrimary(ctx, key)
	}
	rec, found, err := r.register(ctx, key, slotsOf(lay, missed))
	if err != nil {
		return Item{}, fmt.Errorf("replicas: get %q: %w", key, err)
	}
	if !found {
		r.stats.misses.Add(1)
		return Item{}, ErrNotFound
	}
	r.fill(ctx, key, lay, missed, rec)
	return r.fromRecord(rec)
}

// readPrimary reads key's primary record with one GET.
func (r *Replicator) readPrimary(ctx context.Context, key string) (Item, error) {
	r.stats.primaryReads.Add(1)
	raw, err := bound.Do(ctx, func() (string, error) { return r.client.Get(ctx, r.primaryKey(key)).Result() })
	if errors.Is(err, redis.Nil) {
		r.stats.misses.Add(1)
		return Item{}, ErrNotFound
	}
	if err != nil {
		return Item{}, fmt.Errorf("replicas: get %q: %w", key, err)
	}
	if isMarker(raw) {
		r.stats.misses.Add(1)
		return Item{}, ErrNotFound
	}
	rec, ok := decode(raw)
	if !ok {
		return Item{}, fmt.Errorf("replicas: get %q: %w", key, ErrCorrupt)
	}
	return r.fromRecord(rec)
}

// isMarker reports whether raw, read at a primary, is a lease or an absent or error marker
// (see acquire.lua) rather than a record: the key holds no value.
func isMarker(raw string) bool {
	p, _, ok := strings.Cut(raw, ",")
	return ok && (p == "l2" || p == "n2" || p == "e2")
}

// fromRecord converts a live or expired record into Get's result.
func (r *Replicator) fromRecord(rec record) (Item, error) {
	if rec.tombstone || !rec.live(r.opts.Clock().UnixMilli()) {
		r.stats.misses.Add(1)
		return Item{}, ErrNotFound
	}
	return Item{Value: []byte(rec.data), Version: rec.version}, nil
}

// pick returns the index of the copy to read first.
func (r *Replicator) pick(lay *layout) int {
	n := uint64(len(lay.keys))
	if r.opts.Affinity {
		return int((r.aff + lay.hash) % n)
	}
	return int(r.opts.Rand() % n)
}

// readCopies reads a hot key's copies from its first choice on. done reports that the
// answer is final (a live value or tombstone, or ctx's end); otherwise missed names the copy
// found empty or expired (nil when every copy failed) and the primary decides.
func (r *Replicator) readCopies(ctx context.Context, key string, lay *layout) (it Item, done bool, missed []int, err error) {
	n := len(lay.keys)
	first := r.pick(lay)
	for k := 0; k < n && ctx.Err() == nil; k++ {
		i := (first + k) % n
		if k == 1 {
			r.stats.fallbacks.Add(1)
		}
		r.stats.copyReads[i].Add(1)
		raw, err := bound.Do(ctx, func() (string, error) { return r.client.Get(ctx, lay.keys[i]).Result() })
		if err != nil && !errors.Is(err, redis.Nil) {
			r.kickRefresh()
			continue
		}
		rec, ok := decode(raw)
		if err != nil || !ok || !rec.live(r.opts.Clock().UnixMilli()) {
			// Empty, expired or unreadable: the primary decides and this copy is refilled.
			r.stats.fallbacks.Add(1)
			return Item{}, false, []int{i}, nil
		}
		it, err := r.fromRecord(rec)
		return it, true, nil, err
	}
	if err := ctx.Err(); err != nil {
		return Item{}, true, nil, fmt.Errorf("replicas: get %q: %w", key, err)
	}
	r.stats.fallbacks.Add(1)
	return Item{}, false, nil, nil
}

// fill writes rec to the copies in missed, which register.lua or acquire.lua registered
// (rec's registry holds their registrations). Failures are ignored: the next read falls
// back again.
func (r *Replicator) fill(ctx context.Context, key string, lay *layout, missed []int, rec record) {
	expiry := r.copyExpiry(rec)
	targets := make([]target, 0, len(missed))
	for _, i := range missed {
		for _, e := range rec.reg {
			if e.slot == lay.slots[i] {
				targets = append(targets, target{index: i, key: lay.keys[i], expiry: expiry, until: e.expiry})
			}
		}
	}
	if r.writeCopies(ctx, key, rec, targets, 0) == nil {
		r.stats.repairs.Add(uint64(len(targets)))
	}
}

// slotsOf returns the registry argument for the copies in idx.
func slotsOf(lay *layout, idx []int) string {
	b := make([]byte, 0, 6*len(idx))
	for j, i := range idx {
		if j > 0 {
			b = append(b, '.')
		}
		b = fmt.Appendf(b, "%d", lay.slots[i])
	}
	return string(b)
}
