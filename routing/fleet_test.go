package routing_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// testFleet is the routing test fleet: three standalone servers as shards "a", "b", "c",
// the shared 3-master cluster as shard "k", and a standalone control Redis.
type testFleet struct {
	prefix  string
	control *redis.Client
	servers map[string]*celebritytest.Server // standalone shards by name
	clients map[string]redis.UniversalClient
}

var shardNames = []string{"a", "b", "c", "k"}

func newFleet(t testing.TB) *testFleet {
	t.Helper()
	srvs := celebritytest.Shards(t, 4)
	f := &testFleet{
		prefix:  prefix(t),
		control: srvs[3].Client(t),
		servers: map[string]*celebritytest.Server{"a": srvs[0], "b": srvs[1], "c": srvs[2]},
		clients: map[string]redis.UniversalClient{},
	}
	for name, s := range f.servers {
		f.clients[name] = s.Client(t)
	}
	f.clients["k"] = celebritytest.SharedCluster(t).Client(t)
	return f
}

// router returns a Router over the fleet, closed at the end of the test. Clients in
// override replace the fleet's clients for those shards.
func (f *testFleet) router(t testing.TB, o routing.Options, override map[string]routing.ShardClient) *routing.Router {
	t.Helper()
	o.Prefix = f.prefix
	o.Shards = map[string]routing.ShardClient{}
	for name, c := range f.clients {
		o.Shards[name] = c
	}
	for name, c := range override {
		o.Shards[name] = c
	}
	r, err := routing.New(f.control, o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	return r
}

func (f *testFleet) store(t testing.TB) *routing.Store {
	t.Helper()
	s, err := routing.NewStore(f.control, routing.StoreOptions{Prefix: f.prefix})
	require.NoError(t, err)
	return s
}

// shard returns a Shard over the fleet's client for name.
func (f *testFleet) shard(t testing.TB, name string) *routing.Shard {
	t.Helper()
	return newShard(t, name, f.clients[name], f.prefix, routing.ShardOptions{})
}

// publishSilently makes tb the current table in the control Redis without announcing it, as
// if the announcement was lost: routers learn it only by fetching.
func (f *testFleet) publishSilently(t testing.TB, tb *routing.Table) {
	t.Helper()
	require.NoError(t, tb.Validate())
	js, err := json.Marshal(tb)
	require.NoError(t, err)
	keys := routing.Keys{Prefix: f.prefix}
	require.NoError(t, f.control.HSet(testkit.Ctx(t), keys.Table(), "gen", strconv.FormatUint(tb.Generation, 10), "table", string(js)).Err())
}

// moveUnit simulates a migration of unit u from shard `from` to shard `to` at generation
// gen: it closes u on `from`, copies u's records, idempotency records and tombstones to
// `to`, and opens u there at gen. (The full protocol, with snapshot, catch-up and barrier
// under load, is migrate's.)
func (f *testFleet) moveUnit(t testing.TB, u routing.Unit, from, to string, gen uint64) {
	t.Helper()
	ctx := testkit.Ctx(t)
	src, dst := f.shard(t, from), f.shard(t, to)
	o, _, err := src.Ownership(ctx, u)
	require.NoError(t, err)
	require.Equal(t, routing.StateOpen, o.State)
	_, err = src.Transition(ctx, u, o, routing.Ownership{Generation: o.Generation, State: routing.StateClosed})
	require.NoError(t, err)
	k := routingfmt.Keys(src.Keys().Tag(u))
	sc, dc := celebritytest.AdminOf(t, f.clients[from]), celebritytest.AdminOf(t, f.clients[to]) // the test copies as the administrator
	for _, h := range []string{k.Records, k.Ops} {
		m, err := sc.HGetAll(ctx, h).Result()
		require.NoError(t, err)
		if len(m) > 0 {
			require.NoError(t, dc.HSet(ctx, h, m).Err())
		}
	}
	for _, z := range []string{k.OpExpiry, k.Tombstones} {
		zs, err := sc.ZRangeWithScores(ctx, z, 0, -1).Result()
		require.NoError(t, err)
		if len(zs) > 0 {
			require.NoError(t, dc.ZAdd(ctx, z, zs...).Err())
		}
	}
	prev, _, err := dst.Ownership(ctx, u)
	require.NoError(t, err)
	_, err = dst.Transition(ctx, u, prev, routing.Ownership{Generation: gen, State: routing.StateOpen})
	require.NoError(t, err)
}

// awaitGen waits until r has installed generation gen.
func awaitGen(t testing.TB, r *routing.Router, gen uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5e9)
	defer cancel()
	got, err := r.Await(ctx, gen)
	require.NoError(t, err)
	require.GreaterOrEqual(t, got, gen)
}

// tenantInBucket returns a tenant name that hashes to bucket b of n.
func tenantInBucket(t testing.TB, b, n uint32, seed string) string {
	t.Helper()
	for i := 0; i < 1_000_000; i++ {
		name := seed + strconv.Itoa(i)
		if bucketOf(name, n) == b {
			return name
		}
	}
	t.Fatalf("no tenant for bucket %d", b)
	return ""
}
