package celebrity

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

// Versioned is a value with its version, as a Loader and a BatchLoader return it.
type Versioned[V any] struct {
	Value   V
	Version uint64
}

// BatchLoader loads several keys from the source in one query (one SQL "WHERE id IN (…)")
// and returns what it found, by key, each with its version (at least 1); a key it leaves out
// is one the source does not have. An error fails every key of the call.
type BatchLoader[V any] func(ctx context.Context, keys []string) (map[string]Versioned[V], error)

// GetMany returns the values of keys, by key, with Get's guarantees for each key: the L1
// answers what it holds (fresh, or stale within Stale while one refresh runs); the other
// keys are read from Redis together (the keys that are not hot with one pipeline: one round
// trip per master, sent in parallel; each hot key from one of its copies) and those Redis
// does not hold are loaded once for the whole fleet, through each key's fill lease, with one
// call of Options.BatchLoader (or of the Loader per key, concurrently, without one). A key
// that another GetMany on this instance is fetching is not fetched again: this call waits
// for that fetch. The values read are installed in the L1 unless an invalidation of the key
// arrived meanwhile.
//
// Keys the source does not have are left out of the map (and, unlike Get's, not remembered
// in this instance's L1: the fleet's absent record in Redis answers them for NegativeTTL).
// The error joins the errors of the other keys that failed, each naming its key, and of
// invalid keys; the values of the keys that did not fail are returned with it. The shared
// work runs detached from ctx, bounded by LoadTimeout and Close; the call returns when ctx
// ends, with ctx's error for the keys not yet answered. Values are shared as Get's are.
func (c *Cache[V]) GetMany(ctx context.Context, keys []string) (map[string]V, error) {
	out := make(map[string]V, len(keys))
	var errs []error
	var miss []string
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		if err := validKey(k); err != nil {
			errs = append(errs, err)
			continue
		}
		e, ok, err := c.l1.GetIfPresent(ctx, k)
		if !ok {
			miss = append(miss, k)
			continue
		}
		errs = c.answer(out, errs, k, e, err)
	}
	if len(miss) > 0 {
		errs = c.getMissing(ctx, miss, out, errs)
	}
	return out, errors.Join(errs...)
}

// answer records key's outcome (e, or err) in out or errs, as Get would return it.
func (c *Cache[V]) answer(out map[string]V, errs []error, key string, e *entry[V], err error) []error {
	switch {
	case err == nil:
		out[key] = c.served(e)
	case errors.Is(err, ErrNotFound):
	case errors.Is(err, l1cache.ErrClosed), errors.Is(err, replicas.ErrClosed):
		errs = append(errs, fmt.Errorf("celebrity: get %q: %w", key, ErrClosed))
	default:
		errs = append(errs, fmt.Errorf("celebrity: get %q: %w", key, err))
	}
	return errs
}

// manyFlight is one key's fetch by a GetMany, which later GetManys of the key wait for.
type manyFlight[V any] struct {
	done chan struct{}
	e    *entry[V]
	err  error
}

// getMissing fetches the keys the L1 did not answer: it waits for the keys another GetMany
// is fetching and fetches the others itself, in one detached fetchMany.
func (c *Cache[V]) getMissing(ctx context.Context, miss []string, out map[string]V, errs []error) []error {
	flights := make(map[string]*manyFlight[V], len(miss))
	var mine []string
	c.manyMu.Lock()
	if c.closed.Load() {
		c.manyMu.Unlock()
		return append(errs, ErrClosed)
	}
	if c.many == nil {
		c.many = map[string]*manyFlight[V]{}
	}
	for _, k := range miss {
		f := c.many[k]
		if f == nil {
			f = &manyFlight[V]{done: make(chan struct{})}
			c.many[k] = f
			mine = append(mine, k)
		}
		flights[k] = f
	}
	if len(mine) > 0 {
		c.manyWG.Add(1)
		go func() {
			defer c.manyWG.Done()
			c.fetchMany(context.WithoutCancel(ctx), mine, flights)
		}()
	}
	c.manyMu.Unlock()
	for _, k := range miss {
		f := flights[k]
		select {
		case <-f.done:
			errs = c.answer(out, errs, k, f.e, f.err)
		case <-ctx.Done():
			return append(errs, fmt.Errorf("celebrity: get many: %w", ctx.Err()))
		}
	}
	return errs
}

// fetchMany reads keys through replicas.GetOrLoadMany (loading what Redis lacks with
// loadBatch), installs each value in the L1 unless the key's stripe moved since before the
// read (an invalidation), and ends each key's flight.
func (c *Cache[V]) fetchMany(ctx context.Context, keys []string, flights map[string]*manyFlight[V]) {
	ep := c.epoch.Load()
	gens := make([]uint64, len(keys))
	for i, k := range keys {
		c.loop.Observe(k)
		gens[i] = c.stripe(k).gen.Load()
	}
	items, kerrs, err := c.rep.GetOrLoadMany(ctx, keys, c.o.TTL, c.loadBatch)
	for i, k := range keys {
		f := flights[k]
		switch {
		case err != nil:
			f.err = err
		case kerrs[k] != nil:
			f.err = kerrs[k]
		default:
			f.e, f.err = c.newEntry(k, items[k])
			if f.err == nil {
				st := c.stripe(k)
				st.mu.Lock()
				if st.gen.Load() == gens[i] && c.epoch.Load() == ep {
					c.l1.Set(k, f.e)
				}
				st.mu.Unlock()
			}
		}
		c.manyMu.Lock()
		delete(c.many, k)
		c.manyMu.Unlock()
		close(f.done)
	}
}

// newEntry decodes an item read from Redis into an L1 entry (load and GetMany).
func (c *Cache[V]) newEntry(key string, item replicas.Item) (*entry[V], error) {
	v, err := decode(c.o.Codec, key, item.Value)
	if err != nil {
		return nil, err
	}
	e := &entry[V]{v: v, version: item.Version, hot: c.loop.IsHot(key)}
	if e.hot {
		e.loaded.Store(true)
		c.hotEntries.Store(key, e)
	}
	return e, nil
}

// loadBatch is GetMany's replicas.BatchLoader: one call of Options.BatchLoader, or the
// Loader per key, concurrently.
func (c *Cache[V]) loadBatch(ctx context.Context, keys []string) (map[string]replicas.Item, error) {
	items := make(map[string]replicas.Item, len(keys))
	failed := replicas.KeyErrors{}
	var mu sync.Mutex
	if c.o.BatchLoader == nil {
		var wg sync.WaitGroup
		for _, k := range keys {
			wg.Go(func() {
				it, err := c.loadSource(ctx, k)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					items[k] = it
				case !errors.Is(err, ErrNotFound):
					failed[k] = err
				}
			})
		}
		wg.Wait()
	} else {
		got, err := c.callBatchLoader(ctx, keys)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			vv, ok := got[k]
			if !ok {
				continue
			}
			if vv.Version == 0 {
				failed[k] = invalidf("the batch loader returned version 0 for %q; versions must be at least 1", k)
				continue
			}
			data, err := encode(c.o.Codec, k, vv.Value)
			if err != nil {
				failed[k] = err
				continue
			}
			items[k] = replicas.Item{Value: data, Version: vv.Version}
		}
	}
	if len(failed) > 0 {
		return items, failed
	}
	return items, nil
}

// callBatchLoader calls Options.BatchLoader, recovering a panic.
func (c *Cache[V]) callBatchLoader(ctx context.Context, keys []string) (got map[string]Versioned[V], err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Key: fmt.Sprint(keys), Value: p, Stack: debug.Stack()}
		}
	}()
	c.sourceLoads.Add(1)
	return c.o.BatchLoader(ctx, keys)
}
