package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/routing"
)

// TestPlanProposesRunnableCommandsForAFatTenant writes through the real Router to three
// shards, one tenant taking most of the writes, and checks that plan measures each shard's
// load and the tenant's share, proposes a carve-out then a split, changes nothing, and that
// both commands it prints run as printed: the carve-out puts the tenant alone on the
// least-loaded other shard, the split spreads it over the shards it named.
func TestPlanProposesRunnableCommandsForAFatTenant(t *testing.T) {
	control := celebritytest.Standalone(t)
	shards := celebritytest.Shards(t, 3)
	prefix := strings.NewReplacer("{", "", "}", "").Replace(celebritytest.NewPrefix(t)) + "routing"
	ctl := []string{"--addr", control.Addr(), "--prefix", prefix}
	shardFlag := "a=" + shards[0].Addr() + ",b=" + shards[1].Addr() + ",c=" + shards[2].Addr()
	r := cli(t, "", nil, append([]string{"routes", "init", "--buckets", "8", "--yes", "a", "b", "c"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	rt, err := routing.New(control.Client(t), routing.Options{Prefix: prefix, Shards: map[string]routing.ShardClient{
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
	require.Equal(t, "change-logs", rep.Source, "the Router publishes no load summary: plan falls back")
	require.Len(t, rep.Shards, 3)
	var total float64
	for _, s := range rep.Shards {
		total += s.RoutedPerS
		if s.Name == source {
			require.Equal(t, "fatshop", s.Tenants[0].Tenant, "the fat tenant is its shard's busiest: %+v", s.Tenants)
			require.Greater(t, s.Tenants[0].Share, 0.5)
			require.Equal(t, fmt.Sprintf("bucket %d", fatBucket), s.Tenants[0].Unit)
		}
	}
	require.InDelta(t, 360.0/60, total, 0.5, "every routed write counted once over the window")
	require.Greater(t, rep.RoutedSkew, 1.5)
	require.Len(t, rep.Proposals, 2, "%+v", rep.Proposals)
	move, split := rep.Proposals[0], rep.Proposals[1]
	require.Equal(t, "carve-out", move.Action, "a bucketed tenant is carved out before it is split")
	require.Equal(t, source, move.Source)
	require.NotEqual(t, source, move.Targets[0])
	require.Equal(t, "celebrity migrate start --carve --tenant fatshop --target "+move.Targets[0]+" --shard "+shardFlag+" "+strings.Join(ctl, " "), move.Command)
	require.Equal(t, "split", split.Action, "fatshop alone writes more than a shard's mean")
	require.Equal(t, source, split.Source)
	require.Contains(t, split.Reason, "from its override on "+move.Targets[0])
	require.Greater(t, split.RoutedPerS, split.MeanPerShard)
	require.Equal(t, 3, split.Width, "5/s against a target of 1/s per shard, bounded by the 3 shards")
	require.Equal(t, []string{"a", "b", "c"}, split.Targets)
	require.Equal(t, "celebrity migrate start --split --tenant fatshop --target a,b,c --shard "+shardFlag+" "+strings.Join(ctl, " "), split.Command)
	require.NotEmpty(t, split.Reason)
	require.Empty(t, split.Note)
	require.Equal(t, uint64(1), rt.Table().Generation, "plan changed nothing")

	// The text form prints the same commands, in order, with their reasons.
	r = cli(t, "", nil, append([]string{"plan", "--shard", shardFlag, "--interval", "100ms"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, move.Command)
	require.Contains(t, r.stdout, split.Command)
	require.Less(t, strings.Index(r.stdout, move.Command), strings.Index(r.stdout, split.Command))
	require.Contains(t, r.stdout, "-> split 3 sub-buckets onto a, b, c")
	require.Contains(t, r.stdout, "why: step 2 of 2")
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

	// A log longer than --max-entries is read in part, and the report says which.
	r = cli(t, "", nil, append([]string{"plan", "--json", "--max-entries", "10", "--shard", shardFlag, "--interval", "100ms"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, decodeJSON[planReport](t, r.stdout).Truncated, fmt.Sprintf("bucket %d", fatBucket))

	// The printed carve-out runs as printed (the CLI drives it) and lands where plan said:
	// the tenant on its own, the other tenants of its bucket where they were.
	fields := strings.Fields(move.Command)
	require.Equal(t, "celebrity", fields[0])
	r = cli(t, "", nil, fields[1:]...)
	require.Equal(t, 0, r.code, "%s\n%s", r.stdout, r.stderr)
	_, err = rt.Await(t.Context(), 2)
	require.NoError(t, err)
	require.Equal(t, move.Targets[0], rt.Table().Overrides["fatshop"])
	require.Equal(t, source, rt.Table().BucketOwner(fatBucket), "the bucket stays")
	_, ok, err := rt.Get(t.Context(), "fatshop", "order:7")
	require.NoError(t, err)
	require.True(t, ok, "the tenant's records moved with it")
	for i := range 12 {
		tenant := "shop" + strconv.Itoa(i)
		_, ok, err := rt.Get(t.Context(), tenant, "k4")
		require.NoError(t, err)
		require.True(t, ok, "%s is untouched", tenant)
	}

	// The operator folds the tenant back: the override is gone and its records are in the
	// bucket again.
	r = cli(t, "", nil, append([]string{"migrate", "start", "--fold", "--tenant", "fatshop", "--shard", shardFlag}, ctl...)...)
	require.Equal(t, 0, r.code, "%s\n%s", r.stdout, r.stderr)
	_, err = rt.Await(t.Context(), 3)
	require.NoError(t, err)
	require.NotContains(t, rt.Table().Overrides, "fatshop")
	_, ok, err = rt.Get(t.Context(), "fatshop", "order:7")
	require.NoError(t, err)
	require.True(t, ok, "the tenant's records came back with it")

	// It is still too hot: the operator runs both printed commands, in order, as printed;
	// every record reads back from the sub-bucket of its key.
	for _, cmd := range []string{move.Command, split.Command} {
		fields := strings.Fields(cmd)
		require.Equal(t, "celebrity", fields[0])
		r = cli(t, "", nil, fields[1:]...)
		require.Equal(t, 0, r.code, "%s: %s\n%s", cmd, r.stdout, r.stderr)
	}
	_, err = rt.Await(t.Context(), 5)
	require.NoError(t, err)
	require.Equal(t, split.Targets, rt.Table().Spreads["fatshop"])
	require.NotContains(t, rt.Table().Overrides, "fatshop")
	for _, key := range []string{"order:7", "order:1", "order:3"} {
		_, ok, err = rt.Get(t.Context(), "fatshop", key)
		require.NoError(t, err)
		require.True(t, ok, "%s moved to its sub-bucket", key)
	}
}

// planFromSummary is one run of the summary-based plan test: the shards as the Router and
// the CLI reach them.
type planFromSummary struct {
	control   *celebritytest.Server
	shards    map[string]routing.ShardClient
	shardFlag string
}

// TestPlanReadsTheRoutersLoadSummary runs the fat-tenant scenario with Routers that publish
// the per-tenant load summary: plan reads it (and says so), measures the tenant's share of
// its shard from the Routers' counts, and the carve-out it prints runs as printed. Every
// shard is a standalone server here; TestPlanWithAClusterShard puts one on a cluster.
func TestPlanReadsTheRoutersLoadSummary(t *testing.T) {
	control := celebritytest.Standalone(t)
	shards := celebritytest.Shards(t, 3)
	runPlanFromSummary(t, planFromSummary{control: control,
		shards:    map[string]routing.ShardClient{"a": shards[0].Client(t), "b": shards[1].Client(t), "c": shards[2].Client(t)},
		shardFlag: "a=" + shards[0].Addr() + ",b=" + shards[1].Addr() + ",c=" + shards[2].Addr()})
}

// TestPlanWithAClusterShard is the same with shard "b" a whole Redis Cluster, named to the
// CLI as b=cluster:host:port: plan samples every master of it, and the printed command
// (which carries the same --shard) runs.
func TestPlanWithAClusterShard(t *testing.T) {
	control := celebritytest.Standalone(t)
	shards := celebritytest.Shards(t, 2)
	cl := celebritytest.SharedCluster(t)
	runPlanFromSummary(t, planFromSummary{control: control,
		shards:    map[string]routing.ShardClient{"a": shards[0].Client(t), "b": cl.Client(t), "c": shards[1].Client(t)},
		shardFlag: "a=" + shards[0].Addr() + ",b=cluster:" + cl.Addrs()[0] + ",c=" + shards[1].Addr()})
}

func runPlanFromSummary(t *testing.T, tc planFromSummary) {
	prefix := strings.NewReplacer("{", "", "}", "").Replace(celebritytest.NewPrefix(t)) + "routing"
	ctl := []string{"--addr", tc.control.Addr(), "--prefix", prefix}
	r := cli(t, "", nil, append([]string{"routes", "init", "--buckets", "8", "--yes", "a", "b", "c"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	rt, err := routing.New(tc.control.Client(t), routing.Options{Prefix: prefix, Shards: tc.shards,
		Load: routing.LoadOptions{Enabled: true, Interval: 100 * time.Millisecond}})
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
	require.Eventually(t, func() bool {
		l, err := routing.ReadTenantLoad(t.Context(), tc.control.Client(t), prefix, time.Hour)
		require.NoError(t, err)
		return l.Ops == 360
	}, 30*time.Second, 20*time.Millisecond, "the Router published every call")
	fatBucket := routing.BucketOf("fatshop", 8)
	source := rt.Table().BucketOwner(fatBucket)

	args := append([]string{"plan", "--json", "--shard", tc.shardFlag, "--interval", "100ms", "--window", "1h"}, ctl...)
	r = cli(t, "", nil, args...)
	require.Equal(t, 0, r.code, r.stderr)
	rep := decodeJSON[planReport](t, r.stdout)
	require.Equal(t, "routers", rep.Source)
	require.NotNil(t, rep.From)
	require.NotNil(t, rep.To)
	var total float64
	for _, s := range rep.Shards {
		total += s.RoutedPerS
		if s.Name == source {
			require.Equal(t, "fatshop", s.Tenants[0].Tenant, "the fat tenant is its shard's busiest: %+v", s.Tenants)
			require.Greater(t, s.Tenants[0].Share, 0.5)
			require.Equal(t, fmt.Sprintf("bucket %d", fatBucket), s.Tenants[0].Unit)
		}
	}
	require.InDelta(t, 360, total*rep.To.Sub(*rep.From).Seconds(), 0.01, "every call counted once over the summary's span")
	require.Empty(t, rep.Truncated, "no change log was read")
	require.GreaterOrEqual(t, len(rep.Proposals), 2, "%+v", rep.Proposals)
	move, split := rep.Proposals[0], rep.Proposals[1]
	require.Equal(t, "fatshop", move.Tenant, "the busiest tenant is proposed first")
	require.Equal(t, "fatshop", split.Tenant)
	require.Equal(t, "split", split.Action)
	require.Equal(t, []string{"a", "b", "c"}, split.Targets)
	require.Equal(t, "celebrity migrate start --split --tenant fatshop --target a,b,c --shard "+tc.shardFlag+" "+strings.Join(ctl, " "), split.Command)
	require.Equal(t, "carve-out", move.Action)
	require.Equal(t, source, move.Source)
	require.Contains(t, move.Command, "celebrity migrate start --carve --tenant fatshop --target "+move.Targets[0]+" --shard "+tc.shardFlag+" ")

	// The text form says which source it read.
	r = cli(t, "", nil, append([]string{"plan", "--shard", tc.shardFlag, "--interval", "100ms", "--window", "1h"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "the Routers counted")
	require.Contains(t, r.stdout, move.Command)
	require.Contains(t, r.stdout, split.Command)

	// --source change-logs reads the logs even though a summary exists.
	r = cli(t, "", nil, append([]string{"plan", "--json", "--source", "change-logs", "--shard", tc.shardFlag, "--interval", "100ms"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "change-logs", decodeJSON[planReport](t, r.stdout).Source)

	// The printed carve-out runs as printed and lands where plan said.
	fields := strings.Fields(move.Command)
	require.Equal(t, "celebrity", fields[0])
	r = cli(t, "", nil, fields[1:]...)
	require.Equal(t, 0, r.code, "%s\n%s", r.stdout, r.stderr)
	_, err = rt.Await(t.Context(), 2)
	require.NoError(t, err)
	require.Equal(t, move.Targets[0], rt.Table().Overrides["fatshop"])
	_, ok, err := rt.Get(t.Context(), "fatshop", "order:7")
	require.NoError(t, err)
	require.True(t, ok, "the tenant's records moved with it")

	// The printed split runs as printed after it and spreads the tenant where plan said.
	fields = strings.Fields(split.Command)
	r = cli(t, "", nil, fields[1:]...)
	require.Equal(t, 0, r.code, "%s\n%s", r.stdout, r.stderr)
	_, err = rt.Await(t.Context(), 3)
	require.NoError(t, err)
	require.Equal(t, split.Targets, rt.Table().Spreads["fatshop"])
	require.NotContains(t, rt.Table().Overrides, "fatshop")
	for i := range 50 {
		_, ok, err := rt.Get(t.Context(), "fatshop", "order:"+strconv.Itoa(i))
		require.NoError(t, err)
		require.True(t, ok, "order:%d moved to its sub-bucket", i)
	}
}

func TestPlanBadInputExitsTwo(t *testing.T) {
	control := celebritytest.Standalone(t)
	shards := celebritytest.Shards(t, 2)
	prefix := strings.NewReplacer("{", "", "}", "").Replace(celebritytest.NewPrefix(t)) + "routing"
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
		"source":        {append([]string{"plan", "--shard", good, "--source", "logs"}, ctl...), "--source must be auto, routers or change-logs"},
		"no summary":    {append([]string{"plan", "--shard", good, "--source", "routers", "--interval", "10ms"}, ctl...), "no load summary under prefix"},
		"cluster shard": {append([]string{"plan", "--shard", "a=" + shards[0].Addr() + ",b=cluster:"}, ctl...), "a cluster shard wants cluster:host:port"},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, "", nil, tc.args...)
			require.Equal(t, 2, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		})
	}
}

// TestPlanReSplitsASpreadTenantStillTooHot spreads a new tenant over two of four shards,
// writes through a Router that publishes its load summary until each sub-bucket alone is
// above the target per-shard load, and checks that plan proposes a re-split to every shard
// whose order keeps each new sub-bucket off its old sub-bucket's shard, and that the command
// runs as printed and lands where plan said.
func TestPlanReSplitsASpreadTenantStillTooHot(t *testing.T) {
	control := celebritytest.Standalone(t)
	servers := celebritytest.Shards(t, 4)
	prefix := strings.NewReplacer("{", "", "}", "").Replace(celebritytest.NewPrefix(t)) + "routing"
	ctl := []string{"--addr", control.Addr(), "--prefix", prefix}
	shards := map[string]routing.ShardClient{}
	var flag []string
	for i, s := range servers {
		name := string(rune('a' + i))
		shards[name] = s.Client(t)
		flag = append(flag, name+"="+s.Addr())
	}
	shardFlag := strings.Join(flag, ",")
	r := cli(t, "", nil, append([]string{"routes", "init", "--buckets", "8", "--yes", "a", "b", "c", "d"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	r = cli(t, "", nil, append([]string{"routes", "spread", "fatshop", "a,b", "--yes", "--shard", shardFlag}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	rt, err := routing.New(control.Client(t), routing.Options{Prefix: prefix, Shards: shards,
		Load: routing.LoadOptions{Enabled: true, Interval: 100 * time.Millisecond}})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.Await(t.Context(), 2)
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
	require.Eventually(t, func() bool {
		l, err := routing.ReadTenantLoad(t.Context(), control.Client(t), prefix, time.Hour)
		require.NoError(t, err)
		return l.Ops == 360
	}, 30*time.Second, 20*time.Millisecond, "the Router published every call")

	r = cli(t, "", nil, append([]string{"plan", "--json", "--shard", shardFlag, "--interval", "100ms", "--window", "1h"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	rep := decodeJSON[planReport](t, r.stdout)
	require.Equal(t, "routers", rep.Source)
	require.NotEmpty(t, rep.Proposals)
	rs := rep.Proposals[0]
	require.Equal(t, "fatshop", rs.Tenant, "the busiest tenant is proposed first: %+v", rep.Proposals)
	require.Equal(t, "re-split", rs.Action)
	require.Equal(t, []string{"a", "b"}, rs.From)
	require.Equal(t, 4, rs.Width, "150 of the 360 calls per sub-bucket against a target of 45 (half the mean of 90), bounded by the 4 shards")
	require.Equal(t, []string{"b", "c", "d", "a"}, rs.Targets, "sub-buckets 0 and 1 leave a and b")
	require.Greater(t, rs.RoutedPerS/2, rs.TargetPerShard)
	require.Equal(t, "celebrity migrate start --split --tenant fatshop --target b,c,d,a --shard "+shardFlag+" "+strings.Join(ctl, " "), rs.Command)

	fields := strings.Fields(rs.Command)
	r = cli(t, "", nil, fields[1:]...)
	require.Equal(t, 0, r.code, "%s\n%s", r.stdout, r.stderr)
	_, err = rt.Await(t.Context(), 3)
	require.NoError(t, err)
	require.Equal(t, rs.Targets, rt.Table().Spreads["fatshop"])
	for i := range 50 {
		_, ok, err := rt.Get(t.Context(), "fatshop", "order:"+strconv.Itoa(i))
		require.NoError(t, err)
		require.True(t, ok, "order:%d moved to its sub-bucket", i)
	}
}

// TestPlanMergesASpreadTenantThatCooled spreads a tenant over two of four shards for a
// sale, writes a little of it and more of a dozen tenants in buckets through a Router that
// publishes its load summary, and checks that plan proposes to merge the cooled spread
// back into one unit on the least-loaded shard, and that the command runs as printed: the
// tenant is overridden there, no longer spread, and every record reads back.
func TestPlanMergesASpreadTenantThatCooled(t *testing.T) {
	control := celebritytest.Standalone(t)
	servers := celebritytest.Shards(t, 4)
	prefix := strings.NewReplacer("{", "", "}", "").Replace(celebritytest.NewPrefix(t)) + "routing"
	ctl := []string{"--addr", control.Addr(), "--prefix", prefix}
	shards := map[string]routing.ShardClient{}
	var flag []string
	for i, s := range servers {
		name := string(rune('a' + i))
		shards[name] = s.Client(t)
		flag = append(flag, name+"="+s.Addr())
	}
	shardFlag := strings.Join(flag, ",")
	r := cli(t, "", nil, append([]string{"routes", "init", "--buckets", "8", "--yes", "a", "b", "c", "d"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	r = cli(t, "", nil, append([]string{"routes", "spread", "sale", "a,b", "--yes", "--shard", shardFlag}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	rt, err := routing.New(control.Client(t), routing.Options{Prefix: prefix, Shards: shards,
		Load: routing.LoadOptions{Enabled: true, Interval: 100 * time.Millisecond}})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.Await(t.Context(), 2)
	require.NoError(t, err)
	_, err = rt.Provision(t.Context())
	require.NoError(t, err)
	for i := range 20 {
		_, err := rt.Do(t.Context(), "sale", "op-sale-"+strconv.Itoa(i), routing.Put("order:"+strconv.Itoa(i), "v"))
		require.NoError(t, err)
	}
	for i := range 12 {
		tenant := "shop" + strconv.Itoa(i)
		for k := range 25 {
			_, err := rt.Do(t.Context(), tenant, fmt.Sprintf("op-%d-%d", i, k), routing.Put("k"+strconv.Itoa(k), "v"))
			require.NoError(t, err)
		}
	}
	require.Eventually(t, func() bool {
		l, err := routing.ReadTenantLoad(t.Context(), control.Client(t), prefix, time.Hour)
		require.NoError(t, err)
		return l.Ops == 320
	}, 30*time.Second, 20*time.Millisecond, "the Router published every call")

	r = cli(t, "", nil, append([]string{"plan", "--json", "--shard", shardFlag, "--interval", "100ms", "--window", "1h"}, ctl...)...)
	require.Equal(t, 0, r.code, r.stderr)
	rep := decodeJSON[planReport](t, r.stdout)
	var mg *proposal
	for i, p := range rep.Proposals {
		if p.Tenant == "sale" {
			mg = &rep.Proposals[i]
		}
	}
	require.NotNil(t, mg, "a merge of the cooled spread is proposed: %+v", rep.Proposals)
	require.Equal(t, "merge", mg.Action)
	require.Equal(t, []string{"a", "b"}, mg.From)
	require.Len(t, mg.Targets, 1)
	require.LessOrEqual(t, mg.RoutedPerS, mg.TargetPerShard)
	require.Equal(t, "celebrity migrate start --merge --tenant sale --target "+mg.Targets[0]+" --shard "+shardFlag+" "+strings.Join(ctl, " "), mg.Command)

	fields := strings.Fields(mg.Command)
	r = cli(t, "", nil, fields[1:]...)
	require.Equal(t, 0, r.code, "%s\n%s", r.stdout, r.stderr)
	_, err = rt.Await(t.Context(), 3)
	require.NoError(t, err)
	require.NotContains(t, rt.Table().Spreads, "sale")
	require.Equal(t, mg.Targets[0], rt.Table().Overrides["sale"])
	for i := range 20 {
		_, ok, err := rt.Get(t.Context(), "sale", "order:"+strconv.Itoa(i))
		require.NoError(t, err)
		require.True(t, ok, "order:%d is in the unit", i)
	}
}
