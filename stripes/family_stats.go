package stripes

import "sync/atomic"

// FamilyStats is a snapshot of a Family's activity in this process. The counts of events
// cover every name the family held since NewFamily, the names it dropped from memory
// included, so they never decrease.
type FamilyStats struct {
	// Names is the number of names held in memory now.
	Names int
	// Applied, Duplicates, TooOld and Sums are the Counter's Stats of the same names,
	// added over the names: events counted, Add calls that found their event already
	// counted or got ErrTooOld, and sums read from Redis.
	Applied, Duplicates, TooOld, Sums uint64
	// CachedSums counts Sum calls answered from the cache (FamilyOptions.MaxStaleness).
	CachedSums uint64
	// Dropped counts names dropped from memory (idle for IdleAfter, or over MaxNames).
	Dropped uint64
	// Promotions and Demotions count the resizes of adaptive striping (HotStripes).
	Promotions, Demotions uint64
	// Seals counts the seals of old generations the loop started; RoundErrors the rounds
	// (Tick) that returned an error.
	Seals, RoundErrors uint64
}

// familyStats holds the atomic counters behind FamilyStats; retired* are the Counter
// stats of the names dropped from memory.
type familyStats struct {
	cachedSums, dropped, promotions, demotions, seals, roundErrors atomic.Uint64
	retiredApplied, retiredDuplicates, retiredTooOld, retiredSums  atomic.Uint64
}

// retire keeps the counts of c, a member being dropped.
func (s *familyStats) retire(c *Counter) {
	s.dropped.Add(1)
	s.retiredApplied.Add(c.stats.applied.Load())
	s.retiredDuplicates.Add(c.stats.duplicates.Load())
	s.retiredTooOld.Add(c.stats.tooOld.Load())
	s.retiredSums.Add(c.stats.sums.Load())
}

// Stats returns a snapshot of the family's counters. It takes the family's lock for as
// long as it reads the names held; fields are not read atomically together.
func (f *Family) Stats() FamilyStats {
	s := &f.stats
	st := FamilyStats{
		CachedSums: s.cachedSums.Load(), Dropped: s.dropped.Load(),
		Promotions: s.promotions.Load(), Demotions: s.demotions.Load(),
		Seals: s.seals.Load(), RoundErrors: s.roundErrors.Load(),
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st.Names = f.lru.Len()
	st.Applied, st.Duplicates = s.retiredApplied.Load(), s.retiredDuplicates.Load()
	st.TooOld, st.Sums = s.retiredTooOld.Load(), s.retiredSums.Load()
	for e := f.lru.Front(); e != nil; e = e.Next() {
		c := e.Value.(*familyMember).c
		st.Applied += c.stats.applied.Load()
		st.Duplicates += c.stats.duplicates.Load()
		st.TooOld += c.stats.tooOld.Load()
		st.Sums += c.stats.sums.Load()
	}
	return st
}
