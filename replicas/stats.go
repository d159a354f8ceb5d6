package replicas

import "sync/atomic"

// Stats is a snapshot of a Replicator's counters since New.
type Stats struct {
	// CopyReads counts reads sent to each copy index (first choice and fallbacks).
	CopyReads [MaxCopies]uint64
	// PrimaryReads counts reads of logical keys: every read of a key that is not hot, and
	// the last fallback of a hot one.
	PrimaryReads uint64
	// Fallbacks counts hot reads whose first copy missed or failed.
	Fallbacks uint64
	// Repairs counts copies refilled after a read found them empty.
	Repairs uint64
	// Misses counts reads that returned ErrNotFound.
	Misses uint64
	// LeaseWins counts GetOrLoad fetches that took the lease and ran the loader.
	LeaseWins uint64
	// LeaseWaits counts GetOrLoad fetches that found the lease taken and waited.
	LeaseWaits uint64
	// LeaseTakeovers counts lease wins after waiting: the previous holder finished without
	// filling, gave up, or its lease expired.
	LeaseTakeovers uint64
	// FillsRefused counts fills refused because the lease had expired or been superseded,
	// or because a newer version was already stored.
	FillsRefused uint64
	// PartialWrites counts Set and Delete calls that returned a *PartialWriteError.
	PartialWrites uint64
	// StaleWrites counts Set and Delete calls refused with ErrStaleVersion.
	StaleWrites uint64
	// Conflicts counts writes and fills refused with ErrConflict.
	Conflicts uint64
	// NegativeHits counts GetOrLoad fetches answered by another load's "absent" record.
	NegativeHits uint64
	// ErrorHits counts GetOrLoad fetches answered by another load's error record.
	ErrorHits uint64
	// PrefixMismatches counts fleet roll checks (Options.FleetKey) that found another
	// prefix live.
	PrefixMismatches uint64
	// Unreplicated counts writes whose WAIT (Options.WaitReplicas) was not satisfied.
	Unreplicated uint64
	// Promotions counts Promote calls that warmed copies.
	Promotions uint64
	// LayoutReloads counts slot-map reloads that changed the layout.
	LayoutReloads uint64
}

type counters struct {
	copyReads                                [MaxCopies]atomic.Uint64
	primaryReads, fallbacks, repairs, misses atomic.Uint64
	leaseWins, leaseWaits, leaseTakeovers    atomic.Uint64
	fillsRefused, partialWrites, staleWrites atomic.Uint64
	promotions, layoutReloads                atomic.Uint64
	conflicts, negativeHits, errorHits       atomic.Uint64
	unreplicated, prefixMismatches           atomic.Uint64
}

// Stats returns a snapshot of the counters. It is safe to call concurrently with any other
// method; the fields are read one by one, not as one atomic snapshot.
func (r *Replicator) Stats() Stats {
	c := &r.stats
	var s Stats
	for i := range s.CopyReads {
		s.CopyReads[i] = c.copyReads[i].Load()
	}
	s.PrimaryReads = c.primaryReads.Load()
	s.Fallbacks = c.fallbacks.Load()
	s.Repairs = c.repairs.Load()
	s.Misses = c.misses.Load()
	s.LeaseWins = c.leaseWins.Load()
	s.LeaseWaits = c.leaseWaits.Load()
	s.LeaseTakeovers = c.leaseTakeovers.Load()
	s.FillsRefused = c.fillsRefused.Load()
	s.PartialWrites = c.partialWrites.Load()
	s.StaleWrites = c.staleWrites.Load()
	s.Conflicts = c.conflicts.Load()
	s.NegativeHits = c.negativeHits.Load()
	s.ErrorHits = c.errorHits.Load()
	s.Unreplicated = c.unreplicated.Load()
	s.PrefixMismatches = c.prefixMismatches.Load()
	s.Promotions = c.promotions.Load()
	s.LayoutReloads = c.layoutReloads.Load()
	return s
}
