package escrow

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

func TestBadOptionsAreRefusedWithTheFieldNamed(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	cases := []struct {
		name string
		opts PoolOptions
		want string
	}{
		{"capacity zero", PoolOptions{Name: "p", Capacity: 0, Owners: owners(1, "a")}, "PoolOptions.Capacity must be 1..100000, got 0"},
		{"capacity too big", PoolOptions{Name: "p", Capacity: MaxCapacity + 1, Owners: owners(10, "a")}, "PoolOptions.Capacity must be 1..100000"},
		{"empty name", PoolOptions{Capacity: 10, Owners: owners(10, "a")}, "PoolOptions.Name must not be empty"},
		{"brace in name", PoolOptions{Name: "p{x}", Capacity: 10, Owners: owners(10, "a")}, "PoolOptions.Name must not contain"},
		{"no owners", PoolOptions{Name: "p", Capacity: 10}, "PoolOptions.Owners must hold 1..1024 owners, got 0"},
		{"empty owner", PoolOptions{Name: "p", Capacity: 10, Owners: []Owner{{Name: "", First: 1, Last: 10}}}, "PoolOptions.Owners[0].Name must not be empty"},
		{"duplicate owner", PoolOptions{Name: "p", Capacity: 10, Owners: []Owner{{"a", 1, 5}, {"a", 6, 10}}}, `Owners[1].Name "a" is used twice`},
		{"overlap", PoolOptions{Name: "p", Capacity: 10, Owners: []Owner{{"a", 1, 6}, {"b", 5, 10}}}, "ranges overlap"},
		{"gap", PoolOptions{Name: "p", Capacity: 10, Owners: []Owner{{"a", 1, 4}, {"b", 6, 10}}}, "permits 5..5 without an owner"},
		{"short", PoolOptions{Name: "p", Capacity: 10, Owners: []Owner{{"a", 1, 4}, {"b", 5, 9}}}, "permits 10..10 without an owner"},
		{"beyond capacity", PoolOptions{Name: "p", Capacity: 10, Owners: []Owner{{"a", 1, 11}}}, "First <= Last <= Capacity (10), got 1..11"},
		{"reversed", PoolOptions{Name: "p", Capacity: 10, Owners: []Owner{{"a", 6, 5}}}, "got 6..5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPool(c, tc.opts)
			require.Nil(t, p)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "escrow: ")
		})
	}
	_, err := NewCentral(c, CentralOptions{Name: "c", Capacity: 0})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "CentralOptions.Capacity must be 1..100000, got 0")
	_, err = NewCentral(nil, CentralOptions{Name: "c", Capacity: 1})
	require.Error(t, err)
	_, err = NewPool(c, PoolOptions{Name: "p", Capacity: 10, Owners: owners(10, "a", "b"), Prefix: "x{"})
	require.ErrorContains(t, err, "PoolOptions.Prefix")
}

func TestDefaultPrefixIsUsedWhenEmpty(t *testing.T) {
	p, err := NewPool(celebritytest.Standalone(t).Client(t), PoolOptions{Name: "p", Capacity: 4, Owners: owners(4, "a")})
	require.NoError(t, err)
	require.Equal(t, DefaultPrefix+"{p:a}:meta", p.ledgers["a"].keys[0])
	require.True(t, strings.HasPrefix(p.WitnessKey("a"), DefaultPrefix+"{"), p.WitnessKey("a"))
	require.True(t, strings.HasSuffix(p.WitnessKey("a"), "}:witness:p:a"), p.WitnessKey("a"))
}

// TestPoolRefusesClientsThatReadFromReplicas: a cluster client that routes read-only
// commands to replicas would read witnesses (GET) and ledger snapshots (EVALSHA_RO) from a
// replica that may lag, so a ledger behind its witness could pass the fence.
func TestPoolRefusesClientsThatReadFromReplicas(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	opts := PoolOptions{Name: "p", Capacity: 4, Owners: owners(4, "a", "b")}
	for name, set := range map[string]func(*redis.ClusterOptions){
		"ReadOnly":       func(o *redis.ClusterOptions) { o.ReadOnly = true },
		"RouteByLatency": func(o *redis.ClusterOptions) { o.RouteByLatency = true },
		"RouteRandomly":  func(o *redis.ClusterOptions) { o.RouteRandomly = true },
	} {
		_, err := NewPool(cl.Client(t, set), opts)
		require.ErrorContains(t, err, "escrow: client reads from replicas", name)
		w := opts
		w.Witness = cl.Client(t, set)
		_, err = NewPool(cl.Client(t), w)
		require.ErrorContains(t, err, "escrow: PoolOptions.Witness reads from replicas", name)
	}
	_, err := NewPool(cl.Client(t), opts)
	require.NoError(t, err)
}
