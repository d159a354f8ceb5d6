package hotkeys

import (
	"sync"
	"sync/atomic"

	"github.com/celebrity-go/celebrity/internal/spacesaving"
)

// stripe owns the sketches of the keys whose hash falls on it: one Space-Saving summary per
// sub-window in a ring. Keys never cross stripes, so a merged view is the union of the
// stripes' views, and each stripe's summary keeps the Space-Saving error bound over its own
// share of the stream.
type stripe struct {
	mu      sync.Mutex
	buckets []bucket // ring indexed by epoch % len

	sampled   atomic.Uint64
	evictions atomic.Uint64
	rotations atomic.Uint64
	overflow  atomic.Uint64
	tracked   atomic.Int64
	_         [64]byte // keep neighbouring stripes off this cache line
}

// bucket is one sub-window of one stripe.
type bucket struct {
	epoch  int64 // sub-window number since the detector's origin; -1 when never used
	ss     spacesaving.Summary
	total  uint64            // sampled weight recorded in this sub-window
	shards map[string]uint64 // sampled weight per shard; at most maxShardNames names
}

// newStripe returns a stripe of n sub-windows tracking capacity keys each.
func newStripe(n, capacity int) *stripe {
	s := &stripe{buckets: make([]bucket, n)}
	for i := range s.buckets {
		s.buckets[i] = bucket{epoch: -1, ss: spacesaving.New(capacity)}
	}
	return s
}

// record adds weight w for key (hash h, shard name shard) to sub-window epoch. The caller
// holds s.mu.
func (s *stripe) record(epoch int64, key string, h, w uint64, shard string) {
	b := &s.buckets[epoch%int64(len(s.buckets))]
	// A slot holding a newer sub-window means the clock went back by a full window: the
	// event then counts in that newer sub-window rather than erase it.
	if b.epoch < epoch {
		s.tracked.Add(-int64(b.ss.Len()))
		b.ss.Reset()
		b.total = 0
		clear(b.shards)
		b.epoch = epoch
		s.rotations.Add(1)
	}
	evicted, inserted := b.ss.Add(key, h, w)
	if evicted {
		s.evictions.Add(1)
	}
	if inserted {
		s.tracked.Add(1)
	}
	b.total = addSat(b.total, w)
	if shard != "" {
		if b.shards == nil {
			b.shards = make(map[string]uint64)
		}
		if _, ok := b.shards[shard]; ok || len(b.shards) < maxShardNames {
			b.shards[shard] = addSat(b.shards[shard], w)
		} else {
			s.overflow.Add(1)
		}
	}
	s.sampled.Add(1)
}

// live reports whether sub-window b belongs to the window ending in sub-window epoch.
func (s *stripe) live(b *bucket, epoch int64) bool {
	return b.epoch >= 0 && b.epoch <= epoch && b.epoch > epoch-int64(len(s.buckets))
}

// collect merges the live sub-windows into v. The caller holds s.mu.
func (s *stripe) collect(epoch int64, v *view) {
	first := len(v.keys)
	n := 0
	for i := range s.buckets {
		if s.live(&s.buckets[i], epoch) {
			n += s.buckets[i].ss.Len()
		}
	}
	pos := make(map[string]int, n)
	var absentMin uint64 // sum over live full sub-windows of their smallest count
	for i := range s.buckets {
		b := &s.buckets[i]
		if !s.live(b, epoch) {
			continue
		}
		v.total = addSat(v.total, b.total)
		for name, w := range b.shards {
			v.shards[name] = addSat(v.shards[name], w)
		}
		m := b.ss.Min()
		absentMin = addSat(absentMin, m)
		b.ss.Each(func(e spacesaving.Entry) {
			p, ok := pos[e.Key]
			if !ok {
				p = len(v.keys)
				pos[e.Key] = p
				v.keys = append(v.keys, keyAgg{key: e.Key})
			}
			k := &v.keys[p]
			k.count = addSat(k.count, e.Count)
			k.err = addSat(k.err, e.Err)
			k.presentMin = addSat(k.presentMin, m)
		})
	}
	// A key absent from a full sub-window may have had up to that sub-window's smallest
	// count there: widen its error bound by the minima of the sub-windows that lack it.
	for i := first; i < len(v.keys); i++ {
		v.keys[i].err = addSat(v.keys[i].err, subFloor(absentMin, v.keys[i].presentMin))
	}
}
