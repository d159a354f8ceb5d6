package stripes

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Stats is a snapshot of a Counter's activity in this process.
type Stats struct {
	// Applied counts events this process counted.
	Applied uint64
	// Duplicates counts Add calls that found their event already counted.
	Duplicates uint64
	// TooOld counts Add calls that got ErrTooOld.
	TooOld uint64
	// Sums counts successful Sum calls.
	Sums uint64
	// StripeWrites holds, per generation this process wrote to, the applied events per
	// stripe, oldest generation first.
	StripeWrites []GenWrites
}

// GenWrites is the applied-event count of each stripe of one generation.
type GenWrites struct {
	Gen    uint64
	Writes []uint64
}

// counterStats holds the atomic counters behind Stats.
type counterStats struct {
	applied, duplicates, tooOld, sums atomic.Uint64
	gens                              sync.Map // uint64 -> []atomic.Uint64
}

// stripeWrite counts one applied event in stripe i of generation g of n stripes.
func (s *counterStats) stripeWrite(g uint64, n, i int) {
	v, ok := s.gens.Load(g)
	if !ok {
		v, _ = s.gens.LoadOrStore(g, make([]atomic.Uint64, n))
	}
	v.([]atomic.Uint64)[i].Add(1)
}

// Stats returns a snapshot of the counters. Fields are read one by one, not atomically
// together.
func (c *Counter) Stats() Stats {
	st := Stats{
		Applied:    c.stats.applied.Load(),
		Duplicates: c.stats.duplicates.Load(),
		TooOld:     c.stats.tooOld.Load(),
		Sums:       c.stats.sums.Load(),
	}
	c.stats.gens.Range(func(k, v any) bool {
		counts := v.([]atomic.Uint64)
		w := GenWrites{Gen: k.(uint64), Writes: make([]uint64, len(counts))}
		for i := range counts {
			w.Writes[i] = counts[i].Load()
		}
		st.StripeWrites = append(st.StripeWrites, w)
		return true
	})
	sort.Slice(st.StripeWrites, func(i, j int) bool { return st.StripeWrites[i].Gen < st.StripeWrites[j].Gen })
	return st
}
