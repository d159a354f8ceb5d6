package slot_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Load returns by its ctx's deadline (and at a bare cancel) with one master stopped: go-redis
// sends CLUSTER SLOTS to a node of its choice, the stopped one among them, and a read there
// ends only at the client's own timeouts unless the call is bounded. Each client is seeded
// with the stopped node and has loaded the slot map once before it stops.
func TestLoadReturnsByItsDeadlineWithAStoppedNode(t *testing.T) {
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{})
	victim := cl.Masters()[0]
	calls := map[string]func(ctx context.Context) error{}
	for i := range 4 {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{victim.Addr()}})
		t.Cleanup(func() { _ = c.Close() })
		_, err := slot.Load(t.Context(), c)
		require.NoError(t, err)
		calls[fmt.Sprintf("Load %d", i)] = func(ctx context.Context) error { _, err := slot.Load(ctx, c); return err }
	}
	victim.Pause()
	defer victim.Resume()
	celebritytest.RequireReturnsByDeadline(t, 300*time.Millisecond, calls)
}

// Equal compares two maps by where each slot lives: the same ranges in another order are
// equal; a moved slot, another master's address or a nil map are not.
func TestMapEqualComparesOwners(t *testing.T) {
	node := func(addr string) []redis.ClusterNode { return []redis.ClusterNode{{Addr: addr}} }
	load := func(ranges ...redis.ClusterSlot) *slot.Map {
		m, err := slot.FromRanges(ranges)
		require.NoError(t, err)
		return m
	}
	a := load(redis.ClusterSlot{Start: 0, End: 8191, Nodes: node("a:1")}, redis.ClusterSlot{Start: 8192, End: 16383, Nodes: node("b:1")})
	same := load(redis.ClusterSlot{Start: 8192, End: 16383, Nodes: node("b:1")}, redis.ClusterSlot{Start: 0, End: 8191, Nodes: node("a:1")})
	moved := load(redis.ClusterSlot{Start: 0, End: 8192, Nodes: node("a:1")}, redis.ClusterSlot{Start: 8193, End: 16383, Nodes: node("b:1")})
	renamed := load(redis.ClusterSlot{Start: 0, End: 8191, Nodes: node("a:1")}, redis.ClusterSlot{Start: 8192, End: 16383, Nodes: node("c:1")})
	require.True(t, a.Equal(same))
	require.False(t, a.Equal(moved), "slot 8192 moved")
	require.False(t, a.Equal(renamed), "another master")
	require.False(t, a.Equal(nil))
}
