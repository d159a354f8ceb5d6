package l1cache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// Loader reads the value of key from the source behind the cache (a database, a replicas
// read). It returns an error matching ErrNotFound when the key has no value. It runs detached
// from its callers: ctx keeps the values of the first caller's context, not its cancellation,
// and ends after Options.LoadTimeout or at Close.
type Loader[V any] func(ctx context.Context, key string) (V, error)

// numShards is the number of singleflight shards (a power of two).
const numShards = 64

// Cache is a bounded in-process cache of string keys whose misses and refreshes go through
// a Loader, at most one load per key at a time. It is safe for concurrent use. Create it
// with [New]; stop it with [Cache.Close].
type Cache[V any] struct {
	cfg    settings[V]
	loader Loader[V]
	// coarse is the default coarse clock, read directly on the hit path; nil with
	// Options.Clock.
	coarse *otter.CoarseClock
	// base is when the cache was created, by Options.Clock or (with the default clock) the
	// system clock: times read with Options.Clock, and load durations with the default, are
	// counted from it.
	base  time.Time
	store *otter.Cache[string, *entry[V]]
	stats *counters
	// epoch is raised by MarkAllStale; entries loaded in an older epoch are not fresh.
	epoch atomic.Uint64
	// The fields above are read by every hit and written only by New and MarkAllStale; the
	// ones below are written by loads and refreshes. The padding keeps them off the lines
	// (and line pairs) the hits read, so that a load on one core does not make the hits on
	// the others miss.
	_ [128]byte
	// refreshes counts background refreshes running, against MaxRefreshes.
	refreshes atomic.Int64
	shards    [numShards]shard[V]

	closing  context.Context // cancelled by Close: ends every load
	cancel   context.CancelFunc
	lifeMu   sync.RWMutex // guards closed against new loads registering in inflight
	closed   bool
	inflight sync.WaitGroup
}

// New returns a cache that loads missing keys with loader. It fails if loader is nil or an
// option is out of range; the error matches ErrInvalid and names the option and its range.
func New[V any](loader Loader[V], o Options[V]) (*Cache[V], error) {
	if loader == nil {
		return nil, invalidf("loader must not be nil")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cache[V]{cfg: newSettings(o), loader: loader, stats: newCounters()}
	c.closing, c.cancel = context.WithCancel(context.Background())
	for i := range c.shards {
		c.shards[i].calls = make(map[string]*call[V])
	}
	if o.Clock != nil {
		c.base = o.Clock()
	} else {
		c.base, c.coarse = time.Now(), otter.NewCoarseClock(DefaultClockResolution)
	}
	if c.store, err = otter.New(c.storeOptions()); err != nil {
		c.stopClock()
		return nil, errors.Join(errors.New("l1cache: store"), err)
	}
	return c, nil
}

// storeOptions configures the store: its capacity, its clock (the cache's), and an expiry at
// the end of each entry's last window.
func (c *Cache[V]) storeOptions() *otter.Options[string, *entry[V]] {
	oo := &otter.Options[string, *entry[V]]{
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, *entry[V]]) time.Duration {
			return time.Duration(c.removeAt(e.Value) - c.now())
		}),
		OnAtomicDeletion: func(e otter.DeletionEvent[string, *entry[V]]) {
			switch e.Cause {
			case otter.CauseOverflow:
				c.stats.evictions.Add(1)
			case otter.CauseExpiration:
				c.stats.expirations.Add(1)
			}
		},
		Logger: otterLogger{c.cfg.Logger},
		Clock:  otterClock[V]{c},
	}
	if c.coarse != nil {
		oo.Clock = c.coarse
	}
	if c.cfg.MaxEntries > 0 {
		oo.MaximumSize = c.cfg.MaxEntries
	} else {
		oo.MaximumWeight = c.cfg.MaxCost
		// The Sizer ran when the entry was built, outside the cache's and the store's locks.
		oo.Weigher = func(_ string, e *entry[V]) uint32 { return e.cost }
	}
	return oo
}

// now returns the time of every window in nanoseconds: the coarse clock's reading, or
// Options.Clock's since base.
func (c *Cache[V]) now() int64 {
	if c.coarse != nil {
		return c.coarse.NowNano()
	}
	return int64(c.cfg.Clock().Sub(c.base))
}

// preciseNow returns the time load durations are measured on: the system clock with the
// default coarse clock, Options.Clock otherwise.
func (c *Cache[V]) preciseNow() int64 {
	if c.coarse != nil {
		return int64(time.Since(c.base))
	}
	return c.now()
}

// stopClock stops the default coarse clock.
func (c *Cache[V]) stopClock() {
	if c.coarse != nil {
		c.coarse.Stop()
	}
}

// Get returns the value of key. A fresh value is returned at once without allocating. Past
// Fresh and within Stale the old value is returned at once and one background refresh starts.
// Otherwise Get waits for a load, shared with every other Get of the key, until it ends or
// ctx is done (then Get returns ctx's error and the load goes on for the others). A failed
// load returns its error, or the last good value within StaleIfError; the error is cached for
// ErrorTTL. A key without value returns the loader's ErrNotFound error.
func (c *Cache[V]) Get(ctx context.Context, key string) (V, error) {
	// The default clock is read here rather than through now: a generic method's call to
	// another is not inlined, and this one costs as much as the read.
	var now int64
	if c.coarse != nil {
		now = c.coarse.NowNano()
	} else {
		now = c.now()
	}
	e, ok := c.store.GetIfPresent(key)
	if ok && now < e.freshUntil && e.hasValue && e.epoch >= c.epoch.Load() {
		c.stats.hit(hitFresh)
		if c.cfg.Beta > 0 && c.refreshEarly(e, now) {
			c.refresh(ctx, key, e, true)
		}
		if c.cfg.OnEvent != nil {
			c.cfg.OnEvent(Event{Kind: EventHit, Key: key})
		}
		return e.value, nil
	}
	return c.getSlow(ctx, key, e, now)
}

// getSlow serves the cases other than a fresh hit.
func (c *Cache[V]) getSlow(ctx context.Context, key string, e *entry[V], now int64) (V, error) {
	switch c.classify(e, now, c.epoch.Load()) {
	case stFresh: // raced with a MarkAllStale check; serve as the fast path would
		c.stats.hit(hitFresh)
		c.emit(EventHit, key)
		return e.value, nil
	case stStale:
		c.stats.hit(hitStale)
		c.refresh(ctx, key, e, false)
		c.emit(EventStaleHit, key)
		return e.value, nil
	case stStaleNoRetry:
		c.stats.hit(hitStale)
		c.emit(EventStaleHit, key)
		return e.value, nil
	case stStaleIfError:
		c.stats.hit(hitStaleIfError)
		c.emit(EventStaleIfError, key)
		return e.value, nil
	case stCachedErr:
		if e.negative {
			c.stats.hit(hitNegative)
			c.emit(EventNegativeHit, key)
		} else {
			c.stats.hit(hitError)
			c.emit(EventErrorHit, key)
		}
		var zero V
		return zero, e.err.err
	}
	return c.wait(ctx, key)
}

// GetIfPresent answers as Get does when Get would not wait for a load: a fresh value, a
// stale one within Stale (starting the one background refresh Get would start) or within
// StaleIfError, or a cached error (ErrNotFound for a negative entry), with ok true. When Get
// would wait for a load (a miss, an expired entry) it returns ok false and starts nothing:
// the caller loads the key its own way (a batch) and may Set the result.
func (c *Cache[V]) GetIfPresent(ctx context.Context, key string) (v V, ok bool, err error) {
	now := c.now()
	e, _ := c.store.GetIfPresent(key)
	switch c.classify(e, now, c.epoch.Load()) {
	case stMiss, stLoadFallback:
		return v, false, nil
	}
	v, err = c.getSlow(ctx, key, e, now)
	return v, true, err
}

// Set stores v as the fresh value of key, visible to every Get at once. It starts a new
// generation of the key: a load in flight for key finishes for its waiters but does not
// overwrite v.
func (c *Cache[V]) Set(key string, v V) {
	now := c.now()
	e := c.newValueEntry(key, v, c.epoch.Load(), now, 0)
	sh := c.shard(key)
	sh.mu.Lock()
	c.store.Set(key, e)
	sh.supersede(key)
	sh.mu.Unlock()
}

// Invalidate drops key from this cache. It starts a new generation of the key: a load in
// flight for key finishes for its waiters but does not install its result. Invalidate is
// local; use an [Invalidator] to reach the other instances.
func (c *Cache[V]) Invalidate(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	c.store.Invalidate(key)
	sh.supersede(key)
	sh.mu.Unlock()
	c.stats.invalidations.Add(1)
	c.emit(EventInvalidate, key)
}

// InvalidateAll drops every key and starts a new generation of each key being loaded.
func (c *Cache[V]) InvalidateAll() {
	for i := range c.shards {
		c.shards[i].mu.Lock()
	}
	c.store.InvalidateAll()
	for i := range c.shards {
		c.shards[i].supersedeAll()
		c.shards[i].mu.Unlock()
	}
	c.emit(EventInvalidateAll, "")
}

// MarkAllStale ends the fresh window of every entry present and of every load in flight:
// they are served as within Stale (old value at once, one background refresh) when the cache
// has a Stale window, and reloaded otherwise. An [Invalidator] calls it when its subscription
// is established, because invalidations may have been missed before.
func (c *Cache[V]) MarkAllStale() {
	c.epoch.Add(1)
	c.stats.staleMarks.Add(1)
	c.emit(EventMarkAllStale, "")
}

// Stats returns a snapshot of the cache's counters.
func (c *Cache[V]) Stats() Stats {
	s := c.stats.snapshot()
	s.Entries = c.store.EstimatedSize()
	return s
}

// Close cancels every load in flight (their waiters get context.Canceled at once), waits for
// their loaders to return and stops the store's goroutines. It must not be called from a
// Loader or an OnEvent hook, whose load it would wait for. Fresh and stale values are still
// served after Close; a Get that needs a load returns ErrClosed. Close is idempotent and
// always returns nil.
func (c *Cache[V]) Close() error {
	c.lifeMu.Lock()
	c.closed = true
	c.lifeMu.Unlock()
	c.cancel()
	c.inflight.Wait()
	c.store.StopAllGoroutines()
	c.stopClock()
	return nil
}

// emit reports an event to Options.OnEvent, if set.
func (c *Cache[V]) emit(kind EventKind, key string) {
	if c.cfg.OnEvent != nil {
		c.cfg.OnEvent(Event{Kind: kind, Key: key})
	}
}

// otterClock gives the store the cache's clock when Options.Clock is set, without periodic
// clean-up ticks: entries past their windows are removed by the store's maintenance on reads
// and writes.
type otterClock[V any] struct{ c *Cache[V] }

func (o otterClock[V]) NowNano() int64 { return o.c.now() }

func (otterClock[V]) Tick(time.Duration) <-chan time.Time { return nil }

// otterLogger forwards the store's warnings to Options.Logger, if set.
type otterLogger struct{ l *slog.Logger }

func (o otterLogger) Warn(ctx context.Context, msg string, err error) {
	if o.l != nil {
		o.l.WarnContext(ctx, "l1cache: store: "+msg, "err", err)
	}
}

func (o otterLogger) Error(ctx context.Context, msg string, err error) {
	if o.l != nil {
		o.l.ErrorContext(ctx, "l1cache: store: "+msg, "err", err)
	}
}
