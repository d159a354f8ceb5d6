// Package spacesaving is the bounded heavy-hitters summary the project counts with: the
// weighted Space-Saving algorithm over a fixed-size heap and index (the same structure as
// hotkeys' per-stripe sketch), for packages that count named things (tenants, keys) in
// memory that does not grow with the number of distinct names.
package spacesaving

import "math/bits"

// Summary is the Space-Saving heavy-hitters summary of Metwally, Agrawal and El Abbadi
// (2005), weighted: it holds at most cap entries; an update to a tracked key adds its weight;
// an update to an untracked key, when the summary is full, replaces the entry with the
// smallest count m and starts the newcomer at m+w with error m. Every count overestimates
// the key's true weight by at most its error, and the error is at most total/cap. Counts
// saturate at the largest uint64 instead of wrapping.
//
// Entries live in a binary min-heap ordered by count, indexed by an open-addressing hash
// table (linear probing, backward-shift deletion, no tombstones) sized once at
// construction: the memory is fixed by cap and never grows with the number of distinct
// keys seen. It is not safe for concurrent use; the caller's mutex guards it.
type Summary struct {
	heap  []ssEntry // min-heap by count; len(heap) <= cap(heap)
	index []int32   // heap position + 1; 0 means an empty slot
	mask  uint64
}

// ssEntry is one tracked key.
type ssEntry struct {
	key   string
	hash  uint64
	count uint64
	err   uint64
	slot  int32 // position of this entry in index
}

// New returns an empty summary holding at most capacity (>= 1) keys.
func New(capacity int) Summary {
	size := 1
	for size < 2*capacity {
		size <<= 1
	}
	return Summary{
		heap:  make([]ssEntry, 0, capacity),
		index: make([]int32, size),
		mask:  uint64(size - 1),
	}
}

// Reset empties the summary and keeps its memory.
func (s *Summary) Reset() {
	clear(s.heap) // drop key references so the strings can be collected
	s.heap = s.heap[:0]
	clear(s.index)
}

// Full reports whether a new key would evict the smallest entry.
func (s *Summary) Full() bool { return len(s.heap) == cap(s.heap) }

// Min returns the smallest count, or 0 when the summary is not full (an absent key then
// has a true count of exactly 0).
func (s *Summary) Min() uint64 {
	if !s.Full() || len(s.heap) == 0 {
		return 0
	}
	return s.heap[0].count
}

// Add records weight w for key (whose hash is h). It reports whether an entry was evicted
// and whether a new key started to be tracked.
func (s *Summary) Add(key string, h, w uint64) (evicted, inserted bool) {
	slot, found := s.find(key, h)
	if found {
		p := int(s.index[slot] - 1)
		s.heap[p].count = addSat(s.heap[p].count, w)
		s.down(p)
		return false, false
	}
	if !s.Full() {
		p := len(s.heap)
		s.heap = append(s.heap, ssEntry{key: key, hash: h, count: w})
		s.place(slot, p)
		s.up(p)
		return false, true
	}
	m := s.heap[0].count
	s.unindex(int(s.heap[0].slot))
	s.heap[0] = ssEntry{key: key, hash: h, count: addSat(m, w), err: m}
	slot, _ = s.find(key, h) // deletion may have shifted the probe sequence
	s.place(slot, 0)
	s.down(0)
	return true, false
}

// find returns the index slot holding key, or the empty slot where it would go.
func (s *Summary) find(key string, h uint64) (slot uint64, found bool) {
	for i := h & s.mask; ; i = (i + 1) & s.mask {
		v := s.index[i]
		if v == 0 {
			return i, false
		}
		if e := &s.heap[v-1]; e.hash == h && e.key == key {
			return i, true
		}
	}
}

// place records that heap position p lives in index slot.
func (s *Summary) place(slot uint64, p int) {
	s.index[slot] = int32(p + 1)
	s.heap[p].slot = int32(slot)
}

// unindex empties index slot i and shifts the following run back so that every remaining
// key stays reachable from its home slot without tombstones.
func (s *Summary) unindex(i int) {
	hole := uint64(i)
	for j := (hole + 1) & s.mask; ; j = (j + 1) & s.mask {
		v := s.index[j]
		if v == 0 {
			break
		}
		home := s.heap[v-1].hash & s.mask
		// The entry at j may move into the hole unless its home lies cyclically in (hole, j].
		if (j-home)&s.mask >= (j-hole)&s.mask {
			s.index[hole] = v
			s.heap[v-1].slot = int32(hole)
			hole = j
		}
	}
	s.index[hole] = 0
}

// swap exchanges heap positions a and b and keeps the index in step.
func (s *Summary) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.index[s.heap[a].slot] = int32(a + 1)
	s.index[s.heap[b].slot] = int32(b + 1)
}

func (s *Summary) up(p int) {
	for p > 0 {
		parent := (p - 1) / 2
		if s.heap[parent].count <= s.heap[p].count {
			return
		}
		s.swap(p, parent)
		p = parent
	}
}

func (s *Summary) down(p int) {
	n := len(s.heap)
	for {
		l := 2*p + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && s.heap[r].count < s.heap[l].count {
			c = r
		}
		if s.heap[p].count <= s.heap[c].count {
			return
		}
		s.swap(p, c)
		p = c
	}
}

// Entry is one tracked key as Each reports it: Count overestimates the key's true weight by
// at most Err.
type Entry struct {
	Key   string
	Count uint64
	Err   uint64
}

// Len returns the number of tracked keys.
func (s *Summary) Len() int { return len(s.heap) }

// Each calls fn for every tracked key, in no particular order.
func (s *Summary) Each(fn func(Entry)) {
	for i := range s.heap {
		e := &s.heap[i]
		fn(Entry{Key: e.key, Count: e.count, Err: e.err})
	}
}

// addSat returns a+b, or the largest uint64 when the sum does not fit.
func addSat(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return ^uint64(0)
	}
	return s
}
