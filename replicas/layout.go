package replicas

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/slot"
)

// topology is an immutable snapshot of the masters and their slots. Its zero value (no
// masters) stands for a standalone client.
type topology struct {
	masters []string   // sorted addresses
	slots   [][]uint16 // slots[i]: the slots of masters[i], ascending
	owner   []string   // owner[s]: the master of slot s, for comparisons
}

// newTopology builds a topology from a slot map.
func newTopology(m *slot.Map) *topology {
	t := &topology{masters: m.Masters(), owner: make([]string, slot.Count)}
	t.slots = make([][]uint16, len(t.masters))
	for i, a := range t.masters {
		t.slots[i] = m.Slots(a)
	}
	for s := range t.owner {
		t.owner[s] = m.Master(uint16(s))
	}
	// A master with no slots cannot hold copies.
	keep := 0
	for i := range t.masters {
		if len(t.slots[i]) > 0 {
			t.masters[keep], t.slots[keep] = t.masters[i], t.slots[i]
			keep++
		}
	}
	t.masters, t.slots = t.masters[:keep], t.slots[:keep]
	return t
}

// sameAs reports whether t and u place every slot on the same master.
func (t *topology) sameAs(u *topology) bool {
	if len(t.owner) != len(u.owner) {
		return false
	}
	for s := range t.owner {
		if t.owner[s] != u.owner[s] {
			return false
		}
	}
	return true
}

// standaloneStride spreads the copies of a key over distinct slots on a standalone server.
const standaloneStride = slot.Count / MaxCopies

// copySlots returns the slots of the first n copies of key. Copy i goes to master
// (start+i) mod m, where the masters are sorted by address and start = xxhash64(key) mod m,
// so n ≤ m copies land on n distinct masters and n > m copies put ⌊n/m⌋ or ⌈n/m⌉ on each.
// Within its master, copy i takes the slot at position (h + i/m) mod len(slots) of that
// master's ascending slot list (h = the high 32 bits of the hash), so copies sharing a
// master use distinct slots. On a standalone server (no masters) copy i takes slot
// (h + i*512) mod 16384. The result depends only on key, n and the slot map.
func (t *topology) copySlots(key string, n int) []uint16 {
	h := hashing.Sum64(key)
	out := make([]uint16, n)
	m := uint64(len(t.masters))
	if m == 0 {
		for i := range out {
			out[i] = uint16((h>>32 + uint64(i)*standaloneStride) % slot.Count)
		}
		return out
	}
	start := h % m
	for i := range out {
		mi := (start + uint64(i)) % m
		own := t.slots[mi]
		out[i] = own[(h>>32+uint64(i)/m)%uint64(len(own))]
	}
	return out
}

// layout is the placement of one hot key under one topology generation.
type layout struct {
	gen   uint64
	slots []uint16
	keys  []string // keys[i] is the physical key of copy i
	add   string   // slots joined by ".", the registry argument of set.lua and register.lua
	hash  uint64   // xxhash64 of the logical key, for affinity
}

// Physical key names. Each is slot.Tagged(prefix, tag) + marker + key, that is
// "<prefix>{<tag>}<marker><key>"; the markers keep the kinds apart, so no physical key of one
// kind can equal one of another for any key.
const (
	markPrimary = "k:"
	markCopy    = "c:"
	markLease   = "l:"
	markWake    = "w:"
)

// copyKey returns the physical key of the copy of key living in slot s:
// "<prefix>{<tag>}c:<key>", where tag is slot.TagFor(s).
func (r *Replicator) copyKey(s uint16, key string) string {
	return slot.Tagged(r.opts.Prefix, slot.TagFor(s)) + markCopy + key
}

// ownKey returns a key of the given marker in key's own slot.
func (r *Replicator) ownKey(mark, key string) string { return ownKey(r.opts.Prefix, mark, key) }

func ownKey(prefix, mark, key string) string {
	return slot.Tagged(prefix, slot.TagFor(slot.Of(key))) + mark + key
}

// PrimaryKey returns the physical key of key's primary record under prefix (a Replicator's
// Options.Prefix; "" means DefaultPrefix), "<prefix>{<tag>}k:<key>": the key an operator
// inspects in Redis (OBJECT FREQ, TTL) for the logical key. It does not check prefix.
func PrimaryKey(prefix, key string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return ownKey(prefix, markPrimary, key)
}

// primaryKey returns the primary record of key, "<prefix>{<tag>}k:<key>", in key's own slot:
// the authority every write goes through first.
func (r *Replicator) primaryKey(key string) string { return r.ownKey(markPrimary, key) }

// leaseKeys returns the side lease and the wake list of key, in the primary's slot. The
// lease itself lives in the primary record's key while that holds no record.
func (r *Replicator) leaseKeys(key string) (side, wake string) {
	return r.ownKey(markLease, key), r.ownKey(markWake, key)
}

// maxCachedLayouts bounds the layout cache; it is emptied when full.
const maxCachedLayouts = 4096

// layoutFor returns the layout of key's Options.Copies copies under the current topology,
// loading the slot map first if needed.
func (r *Replicator) layoutFor(ctx context.Context, key string) (*layout, error) {
	topo, gen, err := r.topology(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	l := r.layouts[key]
	r.mu.RUnlock()
	if l != nil && l.gen == gen {
		return l, nil
	}
	slots := topo.copySlots(key, r.opts.Copies)
	l = &layout{gen: gen, slots: slots, keys: make([]string, len(slots)), hash: hashing.Sum64(key)}
	parts := make([]string, len(slots))
	for i, s := range slots {
		l.keys[i] = r.copyKey(s, key)
		parts[i] = strconv.Itoa(int(s))
	}
	l.add = strings.Join(parts, ".")
	r.mu.Lock()
	if r.gen == gen {
		if len(r.layouts) >= maxCachedLayouts {
			clear(r.layouts)
		}
		r.layouts[key] = l
	}
	r.mu.Unlock()
	return l, nil
}

// topology returns the current topology and its generation, loading it on first use.
func (r *Replicator) topology(ctx context.Context) (*topology, uint64, error) {
	r.mu.RLock()
	t, gen := r.topo, r.gen
	r.mu.RUnlock()
	if t != nil {
		return t, gen, nil
	}
	if err := r.Refresh(ctx); err != nil {
		return nil, 0, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.topo, r.gen, nil
}

// Refresh reloads the cluster's slot map now and recomputes the layouts if it changed. On a
// standalone client it does nothing. The client itself follows MOVED redirections, so a
// stale layout still reads and writes the right keys; only their spread over masters
// suffers until the reload (periodic, every Options.RefreshInterval, or this call).
func (r *Replicator) Refresh(ctx context.Context) error {
	if r.cluster == nil {
		r.mu.Lock()
		if r.topo == nil {
			r.topo, r.gen = &topology{}, 1
		}
		r.mu.Unlock()
		return nil
	}
	r.loadMu.Lock()
	defer r.loadMu.Unlock()
	m, err := slot.Load(ctx, r.cluster)
	if err != nil {
		return fmt.Errorf("replicas: loading the slot map: %w", err)
	}
	if m.Equal(r.slotMap) {
		return nil // the topology built from it is the one in use
	}
	t := newTopology(m)
	if len(t.masters) == 0 {
		return fmt.Errorf("replicas: the cluster has no master owning slots")
	}
	r.slotMap = m
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.topo != nil && r.topo.sameAs(t) {
		return nil
	}
	if r.topo != nil {
		r.stats.layoutReloads.Add(1)
	}
	r.topo = t
	r.gen++
	clear(r.layouts)
	return nil
}
