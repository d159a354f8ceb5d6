package ratelimit

import "sync/atomic"

// Stats is a snapshot of a Limiter's activity in this process.
type Stats struct {
	// Allowed and Denied count answered requests; Errors counts requests that failed.
	Allowed, Denied, Errors uint64
	// Calls counts script calls sent to Redis, retries included.
	Calls uint64
	// Chunks counts chunk grants received in Leased mode, and Cells the cells they held.
	Chunks, Cells uint64
	// Syncs counts completed syncs in Approximate mode; SyncErrors counts syncs that failed
	// after Options.Attempts, while the instance decided on its last estimate.
	Syncs, SyncErrors uint64
	// SlotTimeouts counts chunk requests left after Options.SlotTimeout in Leased mode.
	SlotTimeouts uint64
	// LateGrants counts chunk grants in Leased mode that arrived after their sub-window
	// ended (a round trip longer than what was left of it): never spent, and asked again.
	LateGrants uint64
	// Leasing is the number of keys this instance leases chunks for now because they are
	// hot in the fleet's sum (Options.HotRate); HotSwitches and ColdSwitches count the keys
	// that turned hot (exact path to leased) and cold (back, or dropped while hot).
	Leasing                   int64
	HotSwitches, ColdSwitches uint64
	// Keys is the number of keys with local state (an estimate).
	Keys int
}

// counters holds the atomic counters behind Stats.
type counters struct {
	allowed, denied, errors, calls, chunks, cells, syncs, syncErrors, slotTimeouts, lateGrants atomic.Uint64
	hotSwitches, coldSwitches                                                                  atomic.Uint64
	leasing                                                                                    atomic.Int64
}

// Stats returns a snapshot of the counters. Fields are read one by one, not atomically
// together.
func (l *Limiter) Stats() Stats {
	s := Stats{
		Allowed: l.stats.allowed.Load(),
		Denied:  l.stats.denied.Load(),
		Errors:  l.stats.errors.Load(),
		Calls:   l.stats.calls.Load(),
		Chunks:  l.stats.chunks.Load(),
		Cells:   l.stats.cells.Load(),
		Syncs:   l.stats.syncs.Load(),

		SyncErrors:   l.stats.syncErrors.Load(),
		SlotTimeouts: l.stats.slotTimeouts.Load(),
		LateGrants:   l.stats.lateGrants.Load(),
		Leasing:      l.stats.leasing.Load(),
		HotSwitches:  l.stats.hotSwitches.Load(),
		ColdSwitches: l.stats.coldSwitches.Load(),
	}
	if l.states != nil {
		s.Keys = l.states.EstimatedSize()
	}
	return s
}
