package l1cache

import (
	"runtime"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
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
	// Refreshes counts background refreshes started in the Stale window, each before its
	// loader is called.
	Refreshes uint64
	// EarlyRefreshes counts background refreshes started early by XFetch, each before its
	// loader is called.
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

// hitStripe holds the counters of the hit path of one P (a scheduler's processor), padded to
// its own pair of cache lines so that hits on different cores never write the same line (the
// adjacent-line prefetcher fetches lines in pairs).
type hitStripe struct {
	n [hitKinds]atomic.Uint64
	_ [128 - hitKinds*8]byte
}

// counters holds the cache's statistics.
type counters struct {
	// stripes has one stripe per P that existed when the cache was created (at least
	// GOMAXPROCS and the number of CPUs); a P beyond them counts its hits in overflow.
	stripes  []hitStripe
	overflow *hitStripe
	// The hits read the fields above; the counters below are written by misses and loads.
	_ [128]byte

	misses, loads, loadErrors, panics, coalesced                 atomic.Uint64
	refreshes, early, skipped, discarded, evictions, expirations atomic.Uint64
	invalidations, staleMarks                                    atomic.Uint64
}

func newCounters() *counters {
	return &counters{stripes: make([]hitStripe, max(runtime.GOMAXPROCS(0), runtime.NumCPU())), overflow: new(hitStripe)}
}

// hit counts one hit of the given kind on the stripe of the P running the calling goroutine.
// The goroutine is pinned to its P meanwhile (it cannot be preempted, and no other goroutine
// runs on that P), so the stripe has one writer at a time and is incremented by a load and a
// store, without a locked instruction; Stats reads it with atomic loads. Hits on different
// cores thus never write the same cache line, whatever the goroutines, and the counts stay
// exact. A P created after the cache (GOMAXPROCS raised beyond the number of CPUs) counts
// with an atomic add in the shared overflow stripe.
func (c *counters) hit(kind int) {
	p := procPin()
	if p < len(c.stripes) {
		n := &c.stripes[p].n[kind]
		n.Store(n.Load() + 1)
		procUnpin()
		return
	}
	procUnpin()
	c.overflow.n[kind].Add(1)
}

// procPin pins the calling goroutine to its P, disabling preemption, and returns the P's id,
// in [0, GOMAXPROCS). The runtime keeps it reachable by linkname for sync and for packages
// outside the standard library (see go.dev/issue/67401).
//
//go:linkname procPin runtime.procPin
func procPin() int

// procUnpin undoes procPin.
//
//go:linkname procUnpin runtime.procUnpin
func procUnpin()

func (c *counters) snapshot() Stats {
	var s Stats
	for i := range len(c.stripes) + 1 {
		st := c.overflow
		if i < len(c.stripes) {
			st = &c.stripes[i]
		}
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
