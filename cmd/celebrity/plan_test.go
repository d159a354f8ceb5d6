package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/routing"
)

// TestPlanProposesRunnableCommandsForAFatTenant writes through the real Router to three
// shards, one tenant taking most of the writes, and checks that plan measures each shard's
// load and the tenant's share, proposes a spread and a move, changes nothing, and that the
// move it prints runs as printed and puts the tenant's bucket on the least-loaded shard.
func TestPlanProposesRunnableCommandsForAFatTenant(t *testing.T) {
	control := celebritytest.Standalone(t)
	shards := celebritytest.Shards(t, 3)
	prefix := strings.NewReplacer("{", "", "}", "").Replace(celebritytest.Prefix(t)) + "routing"
	ctl := []string{"--addr", control.Addr(), "--prefix", prefix}
	shardFlag := "a=" + shards[0].Addr() + ",b=" + shards[1].Addr() + ",c=" + shards[2].Addr()
	r := cli(t, "", nil, append([]string{"routes", "init", "--buckets", "8", "--yes", "a", "b", "c"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	rt, err := routing.New(control.Client(t), routing.Options{Prefix: prefix, Shards: map[string]routing.Scripter{
		"a": shards[0].Client(t), "b": shards[1].Client(t), "c": shards[2].Client(t)}})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.Await(t.Context(), 1)
	require.NoError(t, err)
	_, err = rt.Provision(t.Context())
	require.NoError(t, err)
	for i := range 300 {
		_, err := rt.Do(t.Context(), "fatshop", "op-fat-"+strconv.Itoa(i), routing.Put("order:"+strconv.Itoa(i%50), "v"))
		require.NoError(t, err)
	}
	for i := range 12 {
		tenant := "shop" + strconv.Itoa(i)
		for k := range 5 {
			_, err := rt.Do(t.Context(), tenant, fmt.Sprintf("op-%d-%d", i, k), routing.Put("k"+strconv.Itoa(k), "v"))
			require.NoError(t, err)
		}
	}
	fatBucket := routing.BucketOf("fatshop", 8)
	source := rt.Table().BucketOwner(fatBucket)

	args := append([]string{"plan", "--json", "--shard", shardFlag, "--interval", "200ms", "--window", "1m"}, ctl...)
	r = cli(t, "", nil, args...)
	require.Equal(t, 0, r.code, r.stderr)
	rep := decodeJSON[planReport](t, r.stdout)
	require.Equal(t, uint64(1), rep.Generation)
	require.Len(t, rep.Shards, 3)
	var total float64
	for _, s := range rep.Shards {
		total += s.WritesPerS
		if s.Name == source {
			require.Equal(t, "fatshop", s.Tenants[0].Tenant, "the fat tenant is its shard's busiest: %+v", s.Tenants)
			require.Greater(t, s.Tenants[0].Share, 0.5)
			require.Equal(t, fmt.Sprintf("bucket %d", fatBucket), s.Tenants[0].Unit)
		}
	}
	require.InDelta(t, 360.0/60, total, 0.5, "every routed write counted once over the window")
	require.Greater(t, rep.WriteSkew, 1.5)
	require.Len(t, rep.Proposals, 2, "%+v", rep.Proposals)
	spread, move := rep.Proposals[0], rep.Proposals[1]
	require.Equal(t, "spread", spread.Action, "fatshop alone writes more than a shard's fair share")
	require.Empty(t, spread.Command, "durable data: migrate cannot make a spread of a tenant with records")
	require.NotEmpty(t, spread.Note)
	require.Equal(t, "bucket-move", move.Action)
	require.Equal(t, source, move.Source)
	require.NotEqual(t, source, move.Targets[0])
	require.Contains(t, move.Command, fmt.Sprintf("celebrity migrate start --bucket %d --target %s", fatBucket, move.Targets[0]))
	require.Equal(t, uint64(1), rt.Table().Generation, "plan changed nothing")

	// The text form prints the same commands for the operator to copy.
	r = cli(t, "", nil, append([]string{"plan", "--shard", shardFlag, "--interval", "100ms"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, move.Command)
	require.Contains(t, r.stdout, "nothing was changed")

	// A pure cache gets route changes that re-load: the spread is then runnable.
	r = cli(t, "", nil, append([]string{"plan", "--json", "--cache", "--shard", shardFlag, "--interval", "100ms"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	cached := decodeJSON[planReport](t, r.stdout)
	require.Len(t, cached.Proposals, 1)
	require.Equal(t, "spread", cached.Proposals[0].Action)
	require.Contains(t, cached.Proposals[0].Command, "celebrity routes spread fatshop ")
	require.Contains(t, cached.Proposals[0].Command, " --cache ")

	r = cli(t, "", nil, append([]string{"plan", "--json", "--threshold", "1", "--shard", shardFlag, "--interval", "100ms"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, decodeJSON[planReport](t, r.stdout).Proposals, "no tenant has all of its shard's writes")

	// The printed move runs as printed (the CLI drives it) and lands where plan said.
	fields := strings.Fields(move.Command)
	require.Equal(t, "celebrity", fields[0])
	r = cli(t, "", nil, fields[1:]...)
	require.Equal(t, 0, r.code, "%s\n%s", r.stdout, r.stderr)
	_, err = rt.Await(t.Context(), 2)
	require.NoError(t, err)
	require.Equal(t, move.Targets[0], rt.Table().BucketOwner(fatBucket))
	_, ok, err := rt.Get(t.Context(), "fatshop", "order:7")
	require.NoError(t, err)
	require.True(t, ok, "the tenant's records moved with the bucket")
}

func TestPlanBadInputExitsTwo(t *testing.T) {
	control := celebritytest.Standalone(t)
	shards := celebritytest.Shards(t, 2)
	prefix := strings.NewReplacer("{", "", "}", "").Replace(celebritytest.Prefix(t)) + "routing"
	ctl := []string{"--addr", control.Addr(), "--prefix", prefix}
	r := cli(t, "", nil, append([]string{"routes", "init", "--buckets", "4", "--yes", "a", "b"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	good := "a=" + shards[0].Addr() + ",b=" + shards[1].Addr()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"wrong prefix":  {[]string{"plan", "--shard", good, "--addr", control.Addr(), "--prefix", "nosuch"}, `no route table under prefix "nosuch"`},
		"missing shard": {append([]string{"plan", "--shard", "a=" + shards[0].Addr()}, ctl...), `no address for shard "b"`},
		"unknown shard": {append([]string{"plan", "--shard", good + ",z=127.0.0.1:1"}, ctl...), `names "z"`},
		"no shards":     {append([]string{"plan"}, ctl...), "plan needs --shard"},
		"threshold":     {append([]string{"plan", "--shard", good, "--threshold", "0"}, ctl...), "--threshold must be in (0, 1]"},
		"window":        {append([]string{"plan", "--shard", good, "--window", "10ms"}, ctl...), "--window must be 1s..24h"},
		"arguments":     {append([]string{"plan", "acme", "--shard", good}, ctl...), "plan takes no arguments"},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, "", nil, tc.args...)
			require.Equal(t, 2, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		})
	}
}
