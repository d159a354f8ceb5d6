package routing

import "sync/atomic"

// Stats is a snapshot of a Router's counters.
type Stats struct {
	RoutesHash     uint64 // RoutesHash counts routes resolved by hash bucket.
	RoutesOverride uint64 // RoutesOverride counts routes resolved by an override.
	RoutesSpread   uint64 // RoutesSpread counts routes resolved by a spread.
	// Redirects counts stale-route refusals that Do or Get answered by waiting for a newer
	// table and retrying.
	Redirects uint64
	// Fetches counts table loads from the control Redis; FetchErrors those that failed.
	Fetches     uint64
	FetchErrors uint64
	// Installs counts tables installed; IgnoredOlder counts fetched tables older than the
	// installed one (never installed); IgnoredAnnouncements counts announcements of a
	// generation not newer than the installed one (not fetched).
	Installs             uint64
	IgnoredOlder         uint64
	IgnoredAnnouncements uint64
	// Generation is the installed table's generation (0 before the first).
	Generation uint64
	// LoadReports counts load-summary intervals published (Options.Load); LoadErrors those
	// whose report failed (their counts are dropped).
	LoadReports uint64
	LoadErrors  uint64
}

// stripedCounter spreads increments over cache lines by a hash the caller already has, so
// that concurrent Route calls for different tenants do not contend on one counter.
type stripedCounter struct {
	c [8]struct {
		n atomic.Uint64
		_ [56]byte
	}
}

func (s *stripedCounter) add(h uint64) { s.c[h&7].n.Add(1) }

func (s *stripedCounter) load() uint64 {
	var sum uint64
	for i := range s.c {
		sum += s.c[i].n.Load()
	}
	return sum
}

type stats struct {
	routesHash, routesOverride, routesSpread stripedCounter
	redirects                                atomic.Uint64
	fetches, fetchErrors                     atomic.Uint64
	installs, ignoredOlder                   atomic.Uint64
	ignoredAnnouncements                     atomic.Uint64
	loadReports, loadErrors                  atomic.Uint64
}

// Stats returns a snapshot of the Router's counters.
func (r *Router) Stats() Stats {
	return Stats{
		RoutesHash:           r.stats.routesHash.load(),
		RoutesOverride:       r.stats.routesOverride.load(),
		RoutesSpread:         r.stats.routesSpread.load(),
		Redirects:            r.stats.redirects.Load(),
		Fetches:              r.stats.fetches.Load(),
		FetchErrors:          r.stats.fetchErrors.Load(),
		Installs:             r.stats.installs.Load(),
		IgnoredOlder:         r.stats.ignoredOlder.Load(),
		IgnoredAnnouncements: r.stats.ignoredAnnouncements.Load(),
		Generation:           r.Generation(),
		LoadReports:          r.stats.loadReports.Load(),
		LoadErrors:           r.stats.loadErrors.Load(),
	}
}
