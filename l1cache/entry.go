package l1cache

import (
	"errors"
	"math"
	"sync/atomic"
)

// entry is what the store holds for a key. Its fields never change after it is installed,
// except the refreshing flag; a new load, Set or failure installs a new entry.
//
// The fields a fresh hit reads (the fresh window, the epoch, the value, the early-refresh
// inputs and the flags) come first and the entry keeps no other data inline: for a value of
// two words, such as a string, the entry is 64 bytes, allocated on a cache line of its own,
// so a hit touches one line of it. The stale and stale-if-error windows are
// not kept: they end at freshUntil plus the cache's Stale and StaleIfError (see staleUntil).
type entry[V any] struct {
	// freshUntil ends the fresh window of value.
	freshUntil int64
	// epoch is the cache epoch when the load that produced value started; an entry from an
	// older epoch than the cache's is never fresh (see Cache.MarkAllStale).
	epoch uint64
	value V
	// delta is the duration of the load that produced value, for early refresh.
	delta int64
	// refreshing is set by the one hit that starts a background refresh of this entry.
	refreshing atomic.Bool
	// cost is what Options.Sizer returned for value (1 without a value), measured before the
	// entry is installed so that the Sizer never runs under a lock.
	cost uint32
	// hasValue says value is a good value: the loaded one, or the last good one kept by a
	// failed load for stale-if-error.
	hasValue bool
	// negative says err is the loader's ErrNotFound.
	negative bool
	// err is the failed load (or the absence) this entry caches; nil for a loaded value.
	err *failure
}

// failure is what an entry keeps of a load that failed or found no value.
type failure struct {
	// err is the loader's error: its ErrNotFound for a negative entry, or a load error.
	err error
	// epoch is the cache epoch when the load that produced err started: a cached error is
	// returned only while no MarkAllStale came after it.
	epoch uint64
	// retryAt is when the cached error or absence allows a new load.
	retryAt int64
}

// retryAt is when e allows a new load after a failure; math.MinInt64 when it caches none.
func (e *entry[V]) retryAt() int64 {
	if e.err == nil {
		return math.MinInt64
	}
	return e.err.retryAt
}

// staleUntil and sieUntil end the stale and stale-if-error windows of e's value.
func (c *Cache[V]) staleUntil(e *entry[V]) int64 { return e.freshUntil + c.cfg.stale }
func (c *Cache[V]) sieUntil(e *entry[V]) int64   { return e.freshUntil + c.cfg.sie }

// removeAt is when the store drops e: after the last window of its value and its retry time.
func (c *Cache[V]) removeAt(e *entry[V]) int64 {
	at := e.retryAt()
	if e.hasValue {
		at = max(at, c.staleUntil(e), c.sieUntil(e))
	}
	return at
}

// state is what a Get does with an entry at a given time.
type state uint8

const (
	stMiss         state = iota // load and wait
	stFresh                     // serve value
	stStale                     // serve value, refresh in the background
	stStaleNoRetry              // serve value, a load failed recently: no refresh yet
	stStaleIfError              // serve value, loads fail
	stLoadFallback              // load and wait; serve value if the load fails
	stCachedErr                 // return err
)

// classify decides what a Get at now does with e, given the cache's epoch.
func (c *Cache[V]) classify(e *entry[V], now int64, epoch uint64) state {
	if e == nil {
		return stMiss
	}
	current := e.epoch >= epoch
	retryAt := e.retryAt()
	if e.hasValue {
		if now < e.freshUntil && current {
			return stFresh
		}
		// Within Stale, serve the old value. An entry of an older epoch is stale before its
		// fresh window ends, but only when the cache has a stale window at all.
		if now < c.staleUntil(e) && (now >= e.freshUntil || c.cfg.stale > 0) {
			if now < retryAt {
				return stStaleNoRetry
			}
			return stStale
		}
		// Stale-if-error serves the old value only when the cache has such a window: without
		// one (StaleIfError 0), sieUntil equals freshUntil and is reached here only by an
		// entry of an older epoch, whose failed reload must return its error.
		if c.cfg.sie > 0 && now < c.sieUntil(e) {
			if now < retryAt {
				return stStaleIfError
			}
			return stLoadFallback
		}
	}
	if e.err != nil && now < retryAt && e.err.epoch >= epoch {
		return stCachedErr
	}
	return stMiss
}

// newValueEntry builds the entry of a successful load of key that started at start (epoch
// epoch) and took delta nanoseconds. It calls Options.Sizer, so the caller must hold no lock.
func (c *Cache[V]) newValueEntry(key string, v V, epoch uint64, start, delta int64) *entry[V] {
	// The windows count from the start of the load: the value may have been read at the
	// source at any time during the load, so this bounds its age.
	fresh := start + c.jittered(c.cfg.fresh)
	e := &entry[V]{value: v, hasValue: true, epoch: epoch, freshUntil: fresh, delta: delta, cost: 1}
	if c.cfg.Sizer != nil {
		e.cost = c.cfg.Sizer(key, v)
	}
	return e
}

// newErrorEntry builds the entry of a load that failed with err at now. A negative result
// (ErrNotFound) is cached for NegativeTTL; another error for ErrorTTL, keeping prev's good
// value and windows so that it can still be served within Stale or StaleIfError.
func (c *Cache[V]) newErrorEntry(err error, prev *entry[V], epoch uint64, now int64) *entry[V] {
	if errors.Is(err, ErrNotFound) {
		until := now + c.jittered(c.cfg.negTTL)
		return &entry[V]{err: &failure{err: err, epoch: epoch, retryAt: until}, negative: true, epoch: epoch, cost: 1}
	}
	e := &entry[V]{err: &failure{err: err, epoch: epoch, retryAt: now + c.cfg.errTTL}, epoch: epoch, cost: 1}
	if prev != nil && prev.hasValue && now < max(c.staleUntil(prev), c.sieUntil(prev)) {
		e.value, e.hasValue, e.delta, e.cost = prev.value, true, prev.delta, prev.cost
		e.epoch = min(epoch, prev.epoch)
		e.freshUntil = prev.freshUntil // and so its stale and stale-if-error windows
	}
	return e
}

// jittered shortens d by a random fraction in [0, Jitter).
func (c *Cache[V]) jittered(d int64) int64 {
	if c.cfg.Jitter == 0 {
		return d
	}
	return d - int64(float64(d)*c.cfg.Jitter*c.uniform())
}

// xfetchCutoff is the value of remaining/(Beta*delta) above which the probability of an early
// refresh, exp(-x), is below 1e-17 and no random number is drawn.
const xfetchCutoff = 40

// refreshEarly reports whether a fresh hit at now starts an early refresh of e: XFetch
// (Vattani et al., VLDB 2015) refreshes when now - Beta*delta*ln(u) >= freshUntil for a
// uniform u, that is with probability exp(-(freshUntil-now)/(Beta*delta)).
func (c *Cache[V]) refreshEarly(e *entry[V], now int64) bool {
	if e.delta <= 0 || now < e.retryAt() || e.refreshing.Load() {
		return false
	}
	scale := c.cfg.Beta * float64(e.delta)
	x := float64(e.freshUntil-now) / scale
	if x > xfetchCutoff {
		return false
	}
	return c.uniform() < math.Exp(-x)
}

// uniform returns a uniform value in [0, 1) from the top 53 bits of Options.Rand.
func (c *Cache[V]) uniform() float64 {
	return float64(c.cfg.Rand()>>11) / (1 << 53)
}
