package replicas

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Get returns key's value and version.
//
// A key that is not hot on this instance costs one GET of the logical key, nothing more. A
// hot key is read from one copy (at random, or this instance's copy with Options.Affinity);
// on a miss or an error it tries the other copies, then the logical key, and returns
// ErrNotFound only when none holds a value (a tombstone in the copy read means deleted). A
// copy found empty while the value exists is refilled before Get returns. With every copy
// failing and the logical key unreachable, Get returns the last error.
func (r *Replicator) Get(ctx context.Context, key string) (Item, error) {
	if key == "" {
		return Item{}, errEmptyKey
	}
	if r.IsHot(key) {
		if lay, err := r.layoutFor(ctx, key); err == nil {
			return r.getHot(ctx, key, lay)
		}
		// Without a slot map, the logical key still answers.
	}
	r.stats.primaryReads.Add(1)
	raw, err := r.client.Get(ctx, key).Result()
	return r.item(key, raw, err)
}

// item converts a GET reply into Get's result.
func (r *Replicator) item(key, raw string, err error) (Item, error) {
	if errors.Is(err, redis.Nil) {
		r.stats.misses.Add(1)
		return Item{}, ErrNotFound
	}
	if err != nil {
		return Item{}, fmt.Errorf("replicas: get %q: %w", key, err)
	}
	rec, ok := decode(raw)
	if !ok {
		return Item{}, fmt.Errorf("replicas: get %q: %w", key, ErrCorrupt)
	}
	return r.fromRecord(rec)
}

func (r *Replicator) fromRecord(rec record) (Item, error) {
	if rec.tombstone {
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

// getHot reads a hot key through its copies, falling back as Get describes.
func (r *Replicator) getHot(ctx context.Context, key string, lay *layout) (Item, error) {
	n := len(lay.keys)
	first := r.pick(lay)
	var missed []int
	var lastErr error
	for k := 0; k < n && ctx.Err() == nil; k++ {
		i := (first + k) % n
		if k == 1 {
			r.stats.fallbacks.Add(1)
		}
		r.stats.copyReads[i].Add(1)
		raw, err := r.client.Get(ctx, lay.keys[i]).Result()
		switch {
		case errors.Is(err, redis.Nil):
			missed = append(missed, i)
			continue
		case err != nil:
			lastErr = err
			r.kickRefresh()
			continue
		}
		rec, ok := decode(raw)
		if !ok {
			lastErr = ErrCorrupt
			continue
		}
		if len(missed) > 0 && !rec.tombstone {
			r.repair(ctx, key, lay, missed)
		}
		return r.fromRecord(rec)
	}
	if err := ctx.Err(); err != nil {
		return Item{}, fmt.Errorf("replicas: get %q: %w", key, err)
	}
	if n == 1 {
		r.stats.fallbacks.Add(1)
	}
	// Every copy missed or failed: the logical key decides. When some copies were empty,
	// read it through register.lua so that they can be refilled safely.
	r.stats.primaryReads.Add(1)
	if len(missed) == 0 {
		raw, err := r.client.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) && lastErr != nil {
			err = errors.Join(err, lastErr)
		}
		return r.item(key, raw, err)
	}
	start := time.Now()
	rec, pttl, found, err := r.register(ctx, key, slotsOf(lay, missed))
	if err != nil {
		return Item{}, fmt.Errorf("replicas: get %q: %w", key, err)
	}
	if !found {
		r.stats.misses.Add(1)
		return Item{}, ErrNotFound
	}
	r.fill(ctx, key, lay, missed, rec, pttl-time.Since(start))
	return r.fromRecord(rec)
}

// repair refills the copies in missed from the logical key, registering them first.
// Failures are ignored: the next read falls back again.
func (r *Replicator) repair(ctx context.Context, key string, lay *layout, missed []int) {
	start := time.Now()
	rec, pttl, found, err := r.register(ctx, key, slotsOf(lay, missed))
	if err != nil || !found {
		return
	}
	r.fill(ctx, key, lay, missed, rec, pttl-time.Since(start))
}

// fill writes rec to the copies in missed, at most for remaining.
func (r *Replicator) fill(ctx context.Context, key string, lay *layout, missed []int, rec record, remaining time.Duration) {
	targets := make([]target, 0, len(missed))
	for _, i := range missed {
		if ttl := r.copyTTL(rec, remaining, remaining); ttl > 0 {
			targets = append(targets, target{index: i, key: lay.keys[i], ttl: ttl})
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
