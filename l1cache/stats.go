package l1cache

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Stats is a snapshot of a cache's counters since it was created.
type Stats struct {
	// Hits counts Gets served a fresh value.
	Hits uint64
	// StaleHits counts Gets served a value past Fresh within Stale.
	StaleHits uint64
	// StaleIfErrorHits counts Gets served the last good value because loads failed.
	StaleIfErrorHits uint64
	// NegativeHits counts Gets answered from a cached ErrNotFound.
	NegativeHits uint64
	// ErrorHits counts Gets answered from a cached load error.
	ErrorHits uint64
	// Misses counts Gets that found no usable entry and waited for a load.
	Misses uint64
	// Loads counts loader calls, foreground and background.
	Loads uint64
	// LoadErrors counts loader calls that failed (ErrNotFound is not a failure).
	LoadErrors uint64
	// Panics counts loader calls that panicked (also counted in LoadErrors).
	Panics uint64
	// Coalesced counts Gets that joined a load already in flight.
	Coalesced uint64
	// Refreshes counts background refreshes started in the Stale window.
	Refreshes uint64
	// EarlyRefreshes counts background refreshes started early by XFetch.
	EarlyRefreshes uint64
	// RefreshesSkipped counts refreshes not started because MaxRefreshes were running.
	RefreshesSkipped uint64
	// Discarded counts load results not installed because Set, Invalidate or InvalidateAll
	// started a new generation of the key while the load ran.
	Discarded uint64
	// Evictions counts entries evicted by the capacity bound.
	Evictions uint64
	// Expirations counts entries removed after their last window ended.
	Expirations uint64
	// Invalidations counts Invalidate calls (local or from an Invalidator).
	Invalidations uint64
	// StaleMarks counts MarkAllStale calls.
	StaleMarks uint64
	// Entries is the approximate number of entries held.
	Entries int
}

// Kinds of hit, the counters of the hit path.
const (
	hitFresh = iota
	hitStale
	hitStaleIfError
	hitNegative
	hitError
	hitKinds
)

// hitStripe holds the counters of the hit path, padded to its own cache lines so that
// concurrent hits do not share a line.
type hitStripe struct {
	n [hitKinds]atomic.Uint64
	_ [128 - hitKinds*8]byte
}

// counters holds the cache's statistics.
type counters struct {
	stripes []hitStripe
	mask    uint32

	misses, loads, loadErrors, panics, coalesced                 atomic.Uint64
	refreshes, early, skipped, discarded, evictions, expirations atomic.Uint64
	invalidations, staleMarks                                    atomic.Uint64
}

func newCounters() *counters {
	n := 1
	for n < 4*runtime.GOMAXPROCS(0) && n < 64 {
		n <<= 1
	}
	return &counters{stripes: make([]hitStripe, n), mask: uint32(n - 1)}
}

// hit counts one hit of the given kind on the stripe of the calling goroutine, chosen by a
// hash of its stack address: goroutines running at the same time have different stacks, so
// they usually write different cache lines, and the choice costs no pool, lock or random
// number. A goroutine whose stack moves (it grew) simply moves to another stripe.
func (c *counters) hit(kind int) {
	var x byte
	c.stripes[stackStripe(uintptr(unsafe.Pointer(&x)))&c.mask].n[kind].Add(1)
}

// stackStripe hashes a stack address. The bits below the smallest stack size (2 KiB) depend
// on the call depth rather than on the goroutine, so they are dropped; stacks are aligned to
// their size, so the upper bits are mixed into the low bits that pick a stripe.
func stackStripe(addr uintptr) uint32 {
	return uint32((uint64(addr) >> 11) * 0x9e3779b97f4a7c15 >> 32)
}

func (c *counters) snapshot() Stats {
	var s Stats
	for i := range c.stripes {
		st := &c.stripes[i]
		s.Hits += st.n[hitFresh].Load()
		s.StaleHits += st.n[hitStale].Load()
		s.StaleIfErrorHits += st.n[hitStaleIfError].Load()
		s.NegativeHits += st.n[hitNegative].Load()
		s.ErrorHits += st.n[hitError].Load()
	}
	s.Misses = c.misses.Load()
	s.Loads = c.loads.Load()
	s.LoadErrors = c.loadErrors.Load()
	s.Panics = c.panics.Load()
	s.Coalesced = c.coalesced.Load()
	s.Refreshes = c.refreshes.Load()
	s.EarlyRefreshes = c.early.Load()
	s.RefreshesSkipped = c.skipped.Load()
	s.Discarded = c.discarded.Load()
	s.Evictions = c.evictions.Load()
	s.Expirations = c.expirations.Load()
	s.Invalidations = c.invalidations.Load()
	s.StaleMarks = c.staleMarks.Load()
	return s
}

// EventKind says what an [Event] reports.
type EventKind uint8

// Event kinds.
const (
	EventHit            EventKind = iota + 1 // a fresh value was served
	EventStaleHit                            // a value past Fresh was served
	EventStaleIfError                        // the last good value was served because loads failed
	EventNegativeHit                         // a cached ErrNotFound was returned
	EventErrorHit                            // a cached load error was returned
	EventMiss                                // a Get waits for a load
	EventCoalesced                           // a Get joined a load in flight
	EventLoad                                // a load finished (Err, Duration set)
	EventRefresh                             // a background refresh started in the Stale window
	EventEarlyRefresh                        // a background refresh started early (XFetch)
	EventRefreshSkipped                      // a refresh was not started: MaxRefreshes running
	EventDiscarded                           // a load result was dropped: the key changed meanwhile
	EventInvalidate                          // a key was invalidated
	EventInvalidateAll                       // every key was invalidated
	EventMarkAllStale                        // every entry was marked stale
)

var eventNames = [...]string{
	"unknown", "hit", "stale-hit", "stale-if-error", "negative-hit", "error-hit", "miss",
	"coalesced", "load", "refresh", "early-refresh", "refresh-skipped", "discarded",
	"invalidate", "invalidate-all", "mark-all-stale",
}

// String returns the event kind's name.
func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is passed to Options.OnEvent. Evictions and expirations are counted in [Stats] but
// not reported as events, because the store reports them under its locks.
type Event struct {
	Kind EventKind
	// Key is the key concerned; empty for EventInvalidateAll and EventMarkAllStale.
	Key string
	// Err is the load's error for EventLoad.
	Err error
	// Duration is the load's duration for EventLoad.
	Duration time.Duration
}
