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
	// key is the key loaded, sh its shard.
	key string
	sh  *shard[V]
	// epoch is the cache epoch when the load started, start the time it started.
	epoch uint64
	start int64
	// background says nobody waits for the load: a refresh, counted in Cache.refreshes.
	background bool
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
	j, err := c.join(ctx, key)
	if err != nil {
		var zero V
		return zero, err
	}
	if j.cl == nil {
		return c.getSlow(ctx, key, j.e, j.now)
	}
	c.stats.misses.Add(1)
	c.emit(EventMiss, key)
	if j.coalesced {
		c.emit(EventCoalesced, key)
	}
	select {
	case <-j.cl.done:
		if j.cl.sie {
			c.stats.hit(hitStaleIfError)
			c.emit(EventStaleIfError, key)
		}
		return j.cl.val, j.cl.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// joined is what join found for a Get that missed.
type joined[V any] struct {
	// cl is the load to wait for, nil when e can be served after all.
	cl *call[V]
	// coalesced says cl was in flight already.
	coalesced bool
	// e is the key's entry at now.
	e   *entry[V]
	now int64
}

// join looks at the entry of key again under its shard's mutex: a load may have installed one
// since the caller looked, and loads install under this mutex, so a key is never loaded twice
// for one miss. When the entry still calls for a load, join joins the load in flight of the
// current epoch or starts one.
func (c *Cache[V]) join(ctx context.Context, key string) (joined[V], error) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	j := joined[V]{now: c.now(), e: c.peek(key)}
	epoch := c.epoch.Load()
	if st := c.classify(j.e, j.now, epoch); st != stMiss && st != stLoadFallback {
		return j, nil
	}
	cl, ok := sh.calls[key]
	if ok && cl.epoch >= epoch {
		c.stats.coalesced.Add(1)
		j.cl, j.coalesced = cl, true
		return j, nil
	}
	if ok {
		// The load in flight started before MarkAllStale: a new one replaces it, and the old
		// one must not overwrite the new result if it finishes last.
		sh.supersede(key)
	}
	var err error
	j.cl, err = c.startLoad(ctx, key, sh, epoch, j.now, loadWaited)
	return j, err
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
	kind := loadRefresh
	if early {
		kind = loadEarly
	}
	_, err := c.startLoad(ctx, key, sh, c.epoch.Load(), c.now(), kind)
	sh.mu.Unlock()
	if err != nil {
		c.refreshes.Add(-1)
		return
	}
	if early {
		c.emit(EventEarlyRefresh, key)
	} else {
		c.emit(EventRefresh, key)
	}
}

// loadKind says who waits for a load and which counter of Stats counts it.
type loadKind uint8

const (
	loadWaited  loadKind = iota // a Get waits for it
	loadRefresh                 // a background refresh in the Stale window (Stats.Refreshes)
	loadEarly                   // a background refresh started early by XFetch (Stats.EarlyRefreshes)
)

// peek returns the entry of key without touching the store's policy or statistics.
func (c *Cache[V]) peek(key string) *entry[V] {
	if e, ok := c.store.GetEntryQuietly(key); ok {
		return e.Value
	}
	return nil
}

// startLoad registers a load of key in sh (whose mutex the caller holds), counts it and
// starts it.
func (c *Cache[V]) startLoad(ctx context.Context, key string, sh *shard[V], epoch uint64, now int64, kind loadKind) (*call[V], error) {
	c.lifeMu.RLock()
	if c.closed {
		c.lifeMu.RUnlock()
		return nil, ErrClosed
	}
	c.inflight.Add(1)
	c.lifeMu.RUnlock()
	cl := &call[V]{done: make(chan struct{}), key: key, sh: sh, epoch: epoch, start: now, background: kind != loadWaited}
	sh.calls[key] = cl
	// Count before the loader starts, so that whoever sees the loader run (a loader that
	// signals, the value it installs) also sees the load counted in Stats.
	c.stats.loads.Add(1)
	switch kind {
	case loadRefresh:
		c.stats.refreshes.Add(1)
	case loadEarly:
		c.stats.early.Add(1)
	}
	go c.runLoad(context.WithoutCancel(ctx), cl)
	return cl, nil
}

// runLoad runs the loader for cl and completes cl however the loader ends: by returning, by
// panicking or by runtime.Goexit.
func (c *Cache[V]) runLoad(ctx context.Context, cl *call[V]) {
	defer c.inflight.Done()
	if cl.background {
		defer c.refreshes.Add(-1)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(c.cfg.loadTimeout))
	stop := context.AfterFunc(c.closing, cancel)
	t0 := c.preciseNow()
	// When ctx ends (LoadTimeout or Close), the call finishes with its error even if the
	// loader ignores ctx, so that a hung loader never holds the key; its late result is
	// dropped. This goroutine still waits for the loader, so Close waits for it too.
	abandoned := make(chan struct{})
	stopAbandon := context.AfterFunc(ctx, func() {
		defer close(abandoned)
		var zero V
		c.finish(cl, zero, ctx.Err(), c.preciseNow()-t0)
	})
	var v V
	err := errGoexit
	defer func() {
		stop()
		if !stopAbandon() {
			<-abandoned
		}
		cancel()
		c.finish(cl, v, err, c.preciseNow()-t0)
	}()
	v, err = c.callLoader(ctx, cl.key)
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

// finish completes cl with the loader's result v, err after delta nanoseconds: it installs
// the result unless its generation was superseded, then releases the waiters. Only the first
// finish of cl does anything.
func (c *Cache[V]) finish(cl *call[V], v V, err error, delta int64) {
	var e *entry[V]
	if err == nil {
		e = c.newValueEntry(cl.key, v, cl.epoch, cl.start, delta) // calls the Sizer: before locking
	}
	e, installed, first := c.settle(cl, v, err, e)
	if !first {
		return
	}
	// Count before releasing the waiters, so that their Stats include this load.
	failed := err != nil && !e.negative
	if failed {
		c.stats.loadErrors.Add(1)
	}
	if !installed {
		c.stats.discarded.Add(1)
	}
	close(cl.done)
	c.reportLoad(cl, err, failed, installed, delta)
}

// settle is the step of finish under the shard's mutex. On the first finish of cl it sets
// the waiters' answer (the last good value instead of err within StaleIfError) and installs
// e, or the error entry it builds from the entry being replaced, unless the generation was
// superseded. It returns the entry and whether it was installed, and first = false on a later
// finish, which does nothing.
func (c *Cache[V]) settle(cl *call[V], v V, err error, e *entry[V]) (_ *entry[V], installed, first bool) {
	cl.sh.mu.Lock()
	defer cl.sh.mu.Unlock()
	if cl.finished {
		return e, false, false
	}
	cl.finished = true
	end := c.now()
	if err != nil {
		e = c.newErrorEntry(err, c.peek(cl.key), cl.epoch, end)
	}
	cl.val, cl.err = v, err
	if err != nil && e.hasValue && c.cfg.sie > 0 && end < c.sieUntil(e) {
		cl.val, cl.err, cl.sie = e.value, nil, true
	}
	installed = !cl.superseded
	if installed {
		c.store.Set(cl.key, e)
		delete(cl.sh.calls, cl.key)
	}
	return e, installed, true
}

// reportLoad logs a failed background load, which nobody waits for, and emits the load's
// events, after its waiters were released.
func (c *Cache[V]) reportLoad(cl *call[V], err error, failed, installed bool, delta int64) {
	if failed && cl.background && c.cfg.Logger != nil {
		c.cfg.Logger.Warn("l1cache: background refresh failed", "key", cl.key, "err", err)
	}
	if !installed {
		c.emit(EventDiscarded, cl.key)
	}
	if c.cfg.OnEvent != nil {
		c.cfg.OnEvent(Event{Kind: EventLoad, Key: cl.key, Err: err, Duration: time.Duration(delta)})
	}
}
