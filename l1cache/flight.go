package l1cache

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// errGoexit is the error of a load whose loader called runtime.Goexit.
var errGoexit = errors.New("l1cache: loader called runtime.Goexit")

// call is one load in flight for a key, shared by every Get that waits for it.
type call[V any] struct {
	done chan struct{} // closed when val and err are set
	val  V
	err  error
	// epoch is the cache epoch when the load started.
	epoch uint64
	// sie says val is the last good value, served because the load failed.
	sie bool
	// superseded is set (under the shard's mutex) when Set, Invalidate or a newer load
	// started a new generation of the key: the load must not install its result.
	superseded bool
	// finished is set (under the shard's mutex) by the first finish: the loader returned,
	// or its context ended first.
	finished bool
}

// shard holds the loads in flight of the keys that hash to it. Its mutex also orders every
// write of the store for those keys, which is what makes the generation check exact.
type shard[V any] struct {
	mu    sync.Mutex
	calls map[string]*call[V]
	_     [48]byte // keep shards on separate cache lines
}

// supersede detaches the load in flight for key, if any, so that it cannot install its result.
func (s *shard[V]) supersede(key string) {
	if cl, ok := s.calls[key]; ok {
		cl.superseded = true
		delete(s.calls, key)
	}
}

// supersedeAll detaches every load in flight of the shard.
func (s *shard[V]) supersedeAll() {
	for key, cl := range s.calls {
		cl.superseded = true
		delete(s.calls, key)
	}
}

// shard returns the shard of key. The hash never leaves the process.
func (c *Cache[V]) shard(key string) *shard[V] {
	return &c.shards[xxhash.Sum64String(key)&(numShards-1)]
}

// wait joins or starts the load of key and waits for it or for ctx.
func (c *Cache[V]) wait(ctx context.Context, key string) (V, error) {
	var zero V
	sh := c.shard(key)
	sh.mu.Lock()
	// Look again under the lock: a load may have installed an entry since the caller looked,
	// and loads install under this lock, so a key is never loaded twice for one miss.
	now := c.cfg.Clock.NowNano()
	epoch := c.epoch.Load()
	e := c.peek(key)
	if st := c.classify(e, now, epoch); st != stMiss && st != stLoadFallback {
		sh.mu.Unlock()
		return c.getSlow(ctx, key, e, now)
	}
	cl, ok := sh.calls[key]
	coalesced := ok && cl.epoch >= epoch
	if coalesced {
		c.stats.coalesced.Add(1)
	} else {
		if ok {
			// The load in flight started before MarkAllStale: a new one replaces it, and the
			// old one must not overwrite the new result if it finishes last.
			sh.supersede(key)
		}
		var err error
		if cl, err = c.startLoad(ctx, key, sh, epoch, now, false); err != nil {
			sh.mu.Unlock()
			return zero, err
		}
	}
	sh.mu.Unlock()
	c.stats.misses.Add(1)
	c.emit(EventMiss, key)
	if coalesced {
		c.emit(EventCoalesced, key)
	}
	select {
	case <-cl.done:
		if cl.sie {
			c.stats.hit(hitStaleIfError)
			c.emit(EventStaleIfError, key)
		}
		return cl.val, cl.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// refresh starts one background load of key to replace e, unless one is already running for
// e or for key, e is no longer the key's entry, or MaxRefreshes are running.
func (c *Cache[V]) refresh(ctx context.Context, key string, e *entry[V], early bool) {
	if !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	if c.refreshes.Add(1) > int64(c.cfg.MaxRefreshes) {
		c.refreshes.Add(-1)
		e.refreshing.Store(false)
		c.stats.skipped.Add(1)
		c.emit(EventRefreshSkipped, key)
		return
	}
	sh := c.shard(key)
	sh.mu.Lock()
	_, busy := sh.calls[key]
	if busy || c.peek(key) != e {
		sh.mu.Unlock()
		c.refreshes.Add(-1)
		return
	}
	_, err := c.startLoad(ctx, key, sh, c.epoch.Load(), c.cfg.Clock.NowNano(), true)
	sh.mu.Unlock()
	if err != nil {
		c.refreshes.Add(-1)
		return
	}
	if early {
		c.stats.early.Add(1)
		c.emit(EventEarlyRefresh, key)
	} else {
		c.stats.refreshes.Add(1)
		c.emit(EventRefresh, key)
	}
}

// peek returns the entry of key without touching the store's policy or statistics.
func (c *Cache[V]) peek(key string) *entry[V] {
	if e, ok := c.store.GetEntryQuietly(key); ok {
		return e.Value
	}
	return nil
}

// startLoad registers a load of key in sh (whose mutex the caller holds) and starts it.
func (c *Cache[V]) startLoad(ctx context.Context, key string, sh *shard[V], epoch uint64, now int64, background bool) (*call[V], error) {
	c.lifeMu.RLock()
	if c.closed {
		c.lifeMu.RUnlock()
		return nil, ErrClosed
	}
	c.inflight.Add(1)
	c.lifeMu.RUnlock()
	cl := &call[V]{done: make(chan struct{}), epoch: epoch}
	sh.calls[key] = cl
	c.stats.loads.Add(1)
	go c.runLoad(context.WithoutCancel(ctx), key, sh, cl, now, background)
	return cl, nil
}

// runLoad runs the loader for cl and completes cl however the loader ends: by returning, by
// panicking or by runtime.Goexit.
func (c *Cache[V]) runLoad(ctx context.Context, key string, sh *shard[V], cl *call[V], start int64, background bool) {
	defer c.inflight.Done()
	if background {
		defer c.refreshes.Add(-1)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(c.cfg.loadTimeout))
	stop := context.AfterFunc(c.closing, cancel)
	t0 := c.precise.NowNano()
	// When ctx ends (LoadTimeout or Close), the call finishes with its error even if the
	// loader ignores ctx, so that a hung loader never holds the key; its late result is
	// dropped. This goroutine still waits for the loader, so Close waits for it too.
	abandoned := make(chan struct{})
	stopAbandon := context.AfterFunc(ctx, func() {
		defer close(abandoned)
		var zero V
		c.finish(key, sh, cl, zero, ctx.Err(), start, c.precise.NowNano()-t0, background)
	})
	var v V
	err := errGoexit
	defer func() {
		stop()
		if !stopAbandon() {
			<-abandoned
		}
		cancel()
		c.finish(key, sh, cl, v, err, start, c.precise.NowNano()-t0, background)
	}()
	v, err = c.callLoader(ctx, key)
}

// callLoader calls the loader and turns a panic into a *PanicError.
func (c *Cache[V]) callLoader(ctx context.Context, key string) (v V, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.stats.panics.Add(1)
			pe := &PanicError{Key: key, Value: r, Stack: debug.Stack()}
			if c.cfg.Logger != nil {
				c.cfg.Logger.ErrorContext(ctx, "l1cache: loader panicked", "key", key, "panic", r, "stack", string(pe.Stack))
			}
			err = pe
		}
	}()
	return c.loader(ctx, key)
}

// finish installs the result of cl unless its generation was superseded, then releases its
// waiters. Only the first finish of cl does anything.
func (c *Cache[V]) finish(key string, sh *shard[V], cl *call[V], v V, err error, start, delta int64, background bool) {
	var e *entry[V]
	if err == nil {
		e = c.newValueEntry(key, v, cl.epoch, start, delta) // calls the Sizer: before locking
	}
	sh.mu.Lock()
	if cl.finished {
		sh.mu.Unlock()
		return
	}
	cl.finished = true
	end := c.cfg.Clock.NowNano()
	if err != nil {
		e = c.newErrorEntry(err, c.peek(key), cl.epoch, end)
	}
	cl.val, cl.err = v, err
	if err != nil && e.hasValue && c.cfg.sie > 0 && end < e.sieUntil {
		cl.val, cl.err, cl.sie = e.value, nil, true
	}
	installed := !cl.superseded
	if installed {
		c.store.Set(key, e)
		delete(sh.calls, key)
	}
	sh.mu.Unlock()
	// Count before releasing the waiters, so that their Stats include this load.
	failed := err != nil && !e.negative
	if failed {
		c.stats.loadErrors.Add(1)
	}
	if !installed {
		c.stats.discarded.Add(1)
	}
	close(cl.done)

	if failed && background && c.cfg.Logger != nil { // nobody waits for it: its error goes to the log
		c.cfg.Logger.Warn("l1cache: background refresh failed", "key", key, "err", err)
	}
	if !installed {
		c.emit(EventDiscarded, key)
	}
	if c.cfg.OnEvent != nil {
		c.cfg.OnEvent(Event{Kind: EventLoad, Key: key, Err: err, Duration: time.Duration(delta)})
	}
}
