package routing_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

func TestOverridesAndSpreadsRouteAsSpecified(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{}, nil)
	tb := routing.EvenTable(1, 16, shardNames...)
	tb.SetOverride("fat", "k")
	tb.SetSpread("huge", []string{"a", "b", "c", "k"})
	require.NoError(t, f.store(t).Publish(testkit.Ctx(t), tb))
	awaitGen(t, r, 1)
	n, err := r.Provision(testkit.Ctx(t))
	require.NoError(t, err)
	require.Equal(t, 16+1+4, n)

	rt, err := r.Route("fat", "anything")
	require.NoError(t, err)
	require.Equal(t, routing.TenantUnit("fat"), rt.Unit)
	require.Equal(t, "k", rt.Shard.Name())

	subs := map[uint32]bool{}
	for i := 0; i < 64; i++ {
		key := "order:" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		rt, err := r.Route("huge", key)
		require.NoError(t, err)
		sub := uint32(hashing.Bucket(key, 4))
		require.Equal(t, routing.SpreadUnit("huge", sub), rt.Unit)
		require.Equal(t, tb.Spreads["huge"][sub], rt.Shard.Name())
		subs[sub] = true
	}
	require.Len(t, subs, 4, "64 keys reach every sub-bucket")

	rt, err = r.Route("plain", "k")
	require.NoError(t, err)
	b := bucketOf("plain", 16)
	require.Equal(t, routing.BucketUnit(b), rt.Unit)
	require.Equal(t, tb.BucketOwner(b), rt.Shard.Name())

	// The writes land where the routes say, on the servers themselves.
	ctx := testkit.Ctx(t)
	for _, w := range []struct{ tenant, key string }{{"fat", "x"}, {"huge", "order:a"}, {"huge", "order:b"}, {"plain", "x"}} {
		_, err := r.Do(ctx, w.tenant, "op-"+w.tenant+w.key, routing.Put(w.key, "v"))
		require.NoError(t, err)
		rt, err := r.Route(w.tenant, w.key)
		require.NoError(t, err)
		keys := routingfmt.Keys(routing.Keys{Prefix: f.prefix}.Tag(rt.Unit))
		for _, name := range shardNames {
			has, err := f.clients[name].HExists(ctx, keys.Records, routingfmt.RecordField(w.tenant, w.key)).Result()
			require.NoError(t, err)
			require.Equal(t, name == rt.Shard.Name(), has, "%s/%s on shard %s", w.tenant, w.key, name)
		}
	}
	st := r.Stats()
	require.GreaterOrEqual(t, st.RoutesOverride, uint64(3))
	require.GreaterOrEqual(t, st.RoutesSpread, uint64(64+4))
	require.GreaterOrEqual(t, st.RoutesHash, uint64(3))
	require.Equal(t, uint64(1), st.Generation)
}

// Route must agree with the table's plain definition for every tenant, including tenants
// that share a filter bit with an overridden or spread tenant.
func TestRouteAgreesWithTableDefinition(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
	tb := routing.EvenTable(1, 1024, shardNames...)
	for i := 0; i < 3000; i++ {
		tb.SetOverride("o"+strconv.Itoa(i), shardNames[i%4])
	}
	for i := 0; i < 500; i++ {
		tb.SetSpread("s"+strconv.Itoa(i), shardNames[:1+i%4])
	}
	ok, err := r.Install(tb)
	require.NoError(t, err)
	require.True(t, ok)
	for _, prefix := range []string{"o", "s", "plain-"} {
		for i := 0; i < 7000; i++ {
			tenant, key := prefix+strconv.Itoa(i), "key-"+strconv.Itoa(i)
			rt, err := r.Route(tenant, key)
			require.NoError(t, err)
			var want routing.Unit
			switch {
			case tb.Overrides[tenant] != "":
				want = routing.TenantUnit(tenant)
			case tb.Spreads[tenant] != nil:
				want = routing.SpreadUnit(tenant, uint32(hashing.Bucket(key, uint64(len(tb.Spreads[tenant])))))
			default:
				want = routing.BucketUnit(bucketOf(tenant, 1024))
			}
			require.Equal(t, want, rt.Unit, tenant)
			require.Equal(t, tb.Owner(want), rt.Shard.Name(), tenant)
		}
	}
}
