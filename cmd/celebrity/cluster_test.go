package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// TestRoutesAndMigrateWithTheControlOnACluster keeps the route table and the migration
// journal on a 3-master Redis Cluster (--cluster), plans, and drives a bucket move with the
// CLI: the commands read and change the same state as on a standalone control server.
func TestRoutesAndMigrateWithTheControlOnACluster(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	shards := celebritytest.Shards(t, 2)
	prefix := strings.NewReplacer("{", "", "}", "").Replace(celebritytest.NewPrefix(t)) + "routing"
	ctl := []string{"--cluster", strings.Join(cl.Addrs(), ","), "--prefix", prefix}
	shardFlag := "a=" + shards[0].Addr() + ",b=" + shards[1].Addr()
	run := func(stdin string, args ...string) result { return cli(t, stdin, nil, append(args, ctl...)...) }

	r := run("", "routes", "init", "--buckets", "4", "--yes", "a", "b")
	require.Equal(t, 0, r.code, r.stderr)
	r = run("", "routes", "show", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, uint64(1), decodeJSON[routing.Table](t, r.stdout).Generation)

	rt, err := routing.New(cl.Client(t), routing.Options{Prefix: prefix, Shards: map[string]routing.ShardClient{
		"a": shards[0].Client(t), "b": shards[1].Client(t)}})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.Await(t.Context(), 1)
	require.NoError(t, err)
	_, err = rt.Provision(t.Context())
	require.NoError(t, err)
	for i := range 100 {
		_, err := rt.Do(t.Context(), "shop"+strconv.Itoa(i%5), "op-"+strconv.Itoa(i), routing.Put("k"+strconv.Itoa(i), "v"))
		require.NoError(t, err)
	}
	bucket := routing.BucketOf("shop0", 4)
	target := map[string]string{"a": "b", "b": "a"}[rt.Table().BucketOwner(bucket)]

	r = run("", "plan", "--json", "--interval", "100ms", "--shard", shardFlag)
	require.Equal(t, 0, r.code, r.stderr)
	rep := decodeJSON[planReport](t, r.stdout)
	require.Equal(t, uint64(1), rep.Generation)
	require.Equal(t, "change-logs", rep.Source, "the Routers publish no load summary")
	var writes float64
	for _, s := range rep.Shards {
		writes += s.RoutedPerS
	}
	require.InDelta(t, 100.0/60, writes, 0.1, "every routed write seen once")

	r = run("", "routes", "override", "shop0", target, "--yes", "--shard", shardFlag)
	require.Equal(t, 1, r.code, "a tenant with records is moved, not re-placed")
	require.Contains(t, r.stderr, "celebrity migrate start")

	r = run("", "migrate", "start", "--detach", "--id", "c1", "--bucket", strconv.Itoa(int(bucket)), "--target", target, "--shard", shardFlag, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	r = run("", "migrate", "list", "--json", "--shard", shardFlag)
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, decodeJSON[[]statusJSON](t, r.stdout), 1)
	r = run("", "migrate", "resume", "c1", "--json", "--shard", shardFlag)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, migrate.OwnedB, decodeJSON[statusJSON](t, r.stdout).State)
	_, err = rt.Await(t.Context(), 2)
	require.NoError(t, err)
	require.Equal(t, target, rt.Table().BucketOwner(bucket))
	_, ok, err := rt.Get(t.Context(), "shop0", "k0")
	require.NoError(t, err)
	require.True(t, ok)

	r = run("", "migrate", "status", "nosuch", "--shard", shardFlag)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no such migration")
}

// TestEscrowAuditOnACluster: a pool whose ledgers and witnesses live on a 3-master cluster,
// inspected with --cluster.
func TestEscrowAuditOnACluster(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	name := strings.NewReplacer("{", "", "}", "", ":", "-").Replace(celebritytest.NewPrefix(t)) + "video"
	opts := escrow.PoolOptions{Name: name, Capacity: 12, AllowWeakDurability: true,
		Owners: []escrow.Owner{{Name: "eu", First: 1, Last: 4}, {Name: "us", First: 5, Last: 8}, {Name: "ap", First: 9, Last: 12}}}
	pool, err := escrow.NewPool(cl.Client(t), opts)
	require.NoError(t, err)
	require.NoError(t, pool.Init(t.Context()))
	for i, o := range []string{"eu", "us", "us"} {
		_, err := pool.Acquire(t.Context(), o, "job-"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	flags := []string{"--cluster", cl.Addrs()[0], "--pool", name, "--capacity", "12", "--owners", "eu=1-4,us=5-8,ap=9-12"}
	r := cli(t, "", nil, append([]string{"escrow", "audit", "--json"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	rep := decodeJSON[escrow.AuditReport](t, r.stdout)
	require.True(t, rep.Clean(), "%+v", rep)
	require.Equal(t, 3, rep.Held)
	require.Equal(t, 9, rep.Free)
	r = cli(t, "", nil, append([]string{"escrow", "holders", "--json", "--owner", "us"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, decodeJSON[map[string][]escrow.Holder](t, r.stdout)["us"], 2)
}
