package replicas

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/slot"
)

// mapOf builds a slot map giving each address an equal share of the slots, in order.
func mapOf(t *testing.T, addrs ...string) *slot.Map {
	t.Helper()
	per := slot.Count / len(addrs)
	var ranges []redis.ClusterSlot
	for i, a := range addrs {
		end := (i+1)*per - 1
		if i == len(addrs)-1 {
			end = slot.Count - 1
		}
		ranges = append(ranges, redis.ClusterSlot{Start: i * per, End: end, Nodes: []redis.ClusterNode{{Addr: a}}})
	}
	m, err := slot.FromRanges(ranges)
	require.NoError(t, err)
	return m
}

func TestPlacementBalancesEveryClusterSize(t *testing.T) {
	for masters := 1; masters <= 7; masters++ {
		addrs := make([]string, masters)
		for i := range addrs {
			addrs[i] = fmt.Sprintf("10.0.0.%d:6379", 9-i) // unsorted on purpose
		}
		m := mapOf(t, addrs...)
		topo := newTopology(m)
		for n := 1; n <= MaxCopies; n++ {
			for k := range 5 {
				key := fmt.Sprintf("key-%d", k)
				slots := topo.copySlots(key, n)
				per := map[string]int{}
				seen := map[uint16]bool{}
				for _, s := range slots {
					per[m.Master(s)]++
					require.False(t, seen[s], "distinct slots")
					seen[s] = true
				}
				for _, c := range per {
					require.GreaterOrEqual(t, c, n/masters, "m=%d n=%d", masters, n)
					require.LessOrEqual(t, c, (n+masters-1)/masters, "m=%d n=%d", masters, n)
				}
				require.Len(t, per, min(n, masters))
				// Deterministic, and a prefix of a larger N is the smaller N.
				require.Equal(t, slots, topo.copySlots(key, n))
				require.Equal(t, slots, topo.copySlots(key, MaxCopies)[:n])
			}
		}
	}
}

func TestTopologyChangeIsDetected(t *testing.T) {
	a := newTopology(mapOf(t, "a:1", "b:1", "c:1"))
	b := newTopology(mapOf(t, "c:1", "a:1", "b:1"))
	c := newTopology(mapOf(t, "a:1", "b:1"))
	require.True(t, a.sameAs(a))
	require.False(t, a.sameAs(b), "the same masters owning other slots is a change")
	require.False(t, a.sameAs(c))
	// After the change, copies still land on distinct masters of the new map.
	slots := c.copySlots("post:1", 2)
	require.NotEqual(t, c.owner[slots[0]], c.owner[slots[1]])
}

func TestDecodeRejectsForeignValues(t *testing.T) {
	for _, raw := range []string{"", "plain", "c2,", "c2,x,v,1,,d", "c2,1,q,1,,d", "c2,1,v", "c2,-1,v,1,,d",
		"c2,1,v,x,,d", "c2,1,v,1,7,d", "c2,1,v,1,70000:1,d", "c1,1,v,,d"} {
		_, ok := decode(raw)
		require.False(t, ok, raw)
	}
	rec, ok := decode("c2,18446744073709551615,v,99,12:34.5:6,a,b")
	require.True(t, ok)
	require.Equal(t, record{version: 18446744073709551615, expiry: 99,
		reg: []regEntry{{slot: 12, expiry: 34}, {slot: 5, expiry: 6}}, data: "a,b"}, rec)
}
