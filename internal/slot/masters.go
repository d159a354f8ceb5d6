package slot

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/redis/go-redis/v9"
)

// Map is a snapshot of which master owns each slot. It is immutable once loaded; load a new
// one when the cluster's topology changes.
type Map struct {
	owner   [Count]int16 // index into masters, -1 when the slot is unassigned
	masters []string     // master addresses, sorted
}

// Load reads the slot map of the cluster behind c with CLUSTER SLOTS, which every Redis
// Cluster version answers (CLUSTER SHARDS needs Redis 7). It returns by ctx's end even when
// the node asked does not answer (go-redis waits its own timeouts, and retries, otherwise).
func Load(ctx context.Context, c *redis.ClusterClient) (*Map, error) {
	//lint:ignore SA1019 CLUSTER SLOTS still works on Redis 7 and is the only choice on Redis 6.
	ranges, err := bound.Do(ctx, func() ([]redis.ClusterSlot, error) { return c.ClusterSlots(ctx).Result() })
	if err != nil {
		return nil, fmt.Errorf("slot: CLUSTER SLOTS: %w", err)
	}
	return FromRanges(ranges)
}

// FromRanges builds a Map from CLUSTER SLOTS ranges. The first node of each range is its master.
func FromRanges(ranges []redis.ClusterSlot) (*Map, error) {
	m := &Map{}
	for i := range m.owner {
		m.owner[i] = -1
	}
	index := map[string]int{}
	for _, r := range ranges {
		if len(r.Nodes) == 0 {
			return nil, fmt.Errorf("slot: range %d-%d has no nodes", r.Start, r.End)
		}
		addr := r.Nodes[0].Addr
		if _, ok := index[addr]; !ok {
			index[addr] = len(m.masters)
			m.masters = append(m.masters, addr)
		}
	}
	sort.Strings(m.masters)
	for i, a := range m.masters {
		index[a] = i
	}
	for _, r := range ranges {
		if r.Start < 0 || r.End >= Count || r.Start > r.End {
			return nil, fmt.Errorf("slot: bad range %d-%d", r.Start, r.End)
		}
		for s := r.Start; s <= r.End; s++ {
			m.owner[s] = int16(index[r.Nodes[0].Addr])
		}
	}
	return m, nil
}

// Equal reports whether m and o place every slot on the same master (o may be nil).
func (m *Map) Equal(o *Map) bool {
	return o != nil && m.owner == o.owner && slices.Equal(m.masters, o.masters)
}

// Masters returns the addresses of the masters, sorted, so that every process reading the
// same slot map sees them in the same order.
func (m *Map) Masters() []string {
	return append([]string(nil), m.masters...)
}

// Master returns the address of the master owning slot s, or "" when s is unassigned.
func (m *Map) Master(s uint16) string {
	if s >= Count || m.owner[s] < 0 {
		return ""
	}
	return m.masters[m.owner[s]]
}

// MasterIndex returns the position in Masters of the master owning slot s, or -1.
func (m *Map) MasterIndex(s uint16) int {
	if s >= Count {
		return -1
	}
	return int(m.owner[s])
}

// MasterOfKey returns the address of the master owning key's slot.
func (m *Map) MasterOfKey(key string) string {
	return m.Master(Of(key))
}

// Slots returns the slots owned by the master at addr, in ascending order.
func (m *Map) Slots(addr string) []uint16 {
	var out []uint16
	for s, o := range m.owner {
		if o >= 0 && m.masters[o] == addr {
			out = append(out, uint16(s))
		}
	}
	return out
}
