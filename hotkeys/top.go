package hotkeys

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// KeyLoad is the estimated load of one key over the current window.
type KeyLoad struct {
	// Key is the observed key.
	Key string
	// Count is the estimated number of requests (or cost units) in the window, scaled
	// back from the sample.
	Count float64
	// Error bounds |Count - sampled truth|: the Space-Saving overestimate plus what the key
	// may have had in sub-windows that no longer track it. Sampling noise comes on top.
	Error float64
	// Rate is Count per second of window covered, or per sub-window (Window/Buckets) while
	// the detector is younger than one.
	Rate float64
	// Share is the key's fraction of the window's load, in [0, 1].
	Share float64
}

// view is a merged reading of every stripe at one instant.
type view struct {
	at      time.Time
	covered time.Duration // history the live sub-windows span
	total   uint64        // sampled weight in the window
	keys    []keyAgg
	shards  map[string]uint64
}

// keyAgg is one key's sampled weight summed over the live sub-windows.
type keyAgg struct {
	key        string
	count      uint64
	err        uint64
	presentMin uint64
}

// collect merges the live sub-windows of every stripe as of now.
func (d *Detector) collect(now time.Time) *view {
	e := d.epoch(now)
	v := &view{at: now, shards: make(map[string]uint64)}
	for _, s := range d.stripes {
		s.mu.Lock()
		s.collect(e, v)
		s.mu.Unlock()
	}
	// The live sub-windows start at the beginning of sub-window e-Buckets+1, or at the
	// origin when the detector is younger than that.
	start := d.origin.Add(time.Duration(e-int64(d.o.Buckets)+1) * d.bucketDur)
	if start.Before(d.origin) {
		start = d.origin
	}
	v.covered = now.Sub(start)
	return v
}

// load converts a sampled weight into an estimate over the window.
func (d *Detector) load(v *view, a keyAgg) KeyLoad {
	return KeyLoad{
		Key:   a.key,
		Count: d.scale(a.count),
		Error: d.scale(a.err),
		Rate:  d.rate(v, a.count),
		Share: share(a.count, v.total),
	}
}

// scale turns a sampled weight into an estimate of the unsampled weight.
func (d *Detector) scale(w uint64) float64 { return float64(w) / d.o.SampleRate }

// rate turns a sampled weight into an estimated rate per second. It divides by the history
// covered but by no less than one sub-window: a detector a few milliseconds old would
// otherwise turn a handful of events into millions per second.
func (d *Detector) rate(v *view, w uint64) float64 {
	return d.scale(w) / max(v.covered, d.bucketDur).Seconds()
}

// share returns w's fraction of total, in [0, 1] even when saturated sums make w exceed it.
func share(w, total uint64) float64 {
	if total == 0 {
		return 0
	}
	return min(float64(w)/float64(total), 1)
}

// Top returns the k keys with the highest estimated load in the current window, highest
// first (ties by key), or fewer when fewer are tracked. k must be at least 1; keys beyond
// Capacity per sub-window are not tracked, so asking for more returns at most what is held.
func (d *Detector) Top(k int) ([]KeyLoad, error) {
	if k < 1 {
		return nil, fmt.Errorf("%w: Top needs k >= 1, got %d", ErrInvalid, k)
	}
	v := d.collect(d.clock())
	return d.top(v, k), nil
}

// top returns the k heaviest keys of v, heaviest first. It selects them with a k-entry
// min-heap, so a reading costs O(n log k) rather than a full sort.
func (d *Detector) top(v *view, k int) []KeyLoad {
	k = min(k, len(v.keys))
	h := make([]keyAgg, 0, k) // min-heap under heaviestFirst: h[0] is the lightest kept
	lighter := func(i, j int) bool { return heaviestFirst(h[i], h[j]) > 0 }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			c := l
			if r := l + 1; r < len(h) && lighter(r, l) {
				c = r
			}
			if !lighter(c, i) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for _, a := range v.keys {
		switch {
		case len(h) < k:
			h = append(h, a)
			for i := len(h) - 1; i > 0 && lighter(i, (i-1)/2); i = (i - 1) / 2 {
				h[i], h[(i-1)/2] = h[(i-1)/2], h[i]
			}
		case k > 0 && heaviestFirst(a, h[0]) < 0:
			h[0] = a
			down(0)
		}
	}
	slices.SortFunc(h, heaviestFirst)
	out := make([]KeyLoad, len(h))
	for i, a := range h {
		out[i] = d.load(v, a)
	}
	return out
}

// TotalRate returns the estimated rate of all observed load (requests or cost units per
// second) over the current window.
func (d *Detector) TotalRate() float64 {
	v := d.collect(d.clock())
	return d.rate(v, v.total)
}

// heaviestFirst orders keys by sampled weight, heaviest first, then by key.
func heaviestFirst(a, b keyAgg) int {
	if c := cmp.Compare(b.count, a.count); c != 0 {
		return c
	}
	return cmp.Compare(a.key, b.key)
}
