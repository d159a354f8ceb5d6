package routing_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// loadOf returns tenant's operations in l, and whether l tracks it.
func loadOf(l routing.TenantLoad, tenant string) (routing.TenantOps, bool) {
	for _, t := range l.Tenants {
		if t.Tenant == tenant {
			return t, true
		}
	}
	return routing.TenantOps{}, false
}

// awaitLoad waits until the summary under prefix counts want operations in all.
func awaitLoad(t *testing.T, c redis.UniversalClient, prefix string, want uint64) routing.TenantLoad {
	t.Helper()
	var l routing.TenantLoad
	require.Eventually(t, func() bool {
		var err error
		l, err = routing.ReadTenantLoad(testkit.Ctx(t), c, prefix, time.Hour)
		require.NoError(t, err)
		return l.Ops >= want
	}, 30*time.Second, 20*time.Millisecond)
	return l
}

// TestLoadSummaryMergesEveryRoutersCounts runs two Routers with the load summary on, each
// calling for a fat tenant and a few small ones (Do and Get), and checks that the summary
// read from the control Redis holds every call of both, exactly, per tenant, with the fat
// tenant first and rates over the span the intervals cover.
func TestLoadSummaryMergesEveryRoutersCounts(t *testing.T) {
	f := newFleet(t)
	ctx := testkit.Ctx(t)
	require.NoError(t, f.store(t).Publish(ctx, routing.EvenTable(1, 16, "a", "b", "c")))
	load := routing.LoadOptions{Enabled: true, Interval: 100 * time.Millisecond}
	r1 := f.router(t, routing.Options{Load: load}, nil)
	r2 := f.router(t, routing.Options{Load: load}, nil)
	awaitGen(t, r1, 1)
	awaitGen(t, r2, 1)
	_, err := r1.Provision(ctx)
	require.NoError(t, err)

	want := map[string]uint64{}
	for i, r := range []*routing.Router{r1, r2} {
		for j := range 40 {
			_, err := r.Do(ctx, "fatshop", "op-"+strconv.Itoa(i)+"-"+strconv.Itoa(j), routing.Put("k"+strconv.Itoa(j%5), "v"))
			require.NoError(t, err)
			want["fatshop"]++
		}
		for j := range 5 {
			tenant := "shop-" + strconv.Itoa(j)
			_, _, err := r.Get(ctx, tenant, "k")
			require.NoError(t, err)
			want[tenant]++
		}
	}
	l := awaitLoad(t, f.control, f.prefix, 90)
	require.Equal(t, uint64(90), l.Ops, "every call counted once")
	require.Equal(t, f.prefix, l.Prefix)
	require.GreaterOrEqual(t, l.Reports, 2, "both Routers reported")
	require.Equal(t, "fatshop", l.Tenants[0].Tenant)
	for tenant, n := range want {
		got, ok := loadOf(l, tenant)
		require.True(t, ok, tenant)
		require.Equal(t, n, got.Ops, tenant)
		require.Zero(t, got.Err, "fewer tenants than Capacity: exact counts")
		require.InDelta(t, float64(n)/l.Span().Seconds(), got.Rate, 1e-9)
	}
	require.True(t, l.To.After(l.From))
	require.Zero(t, r1.Stats().LoadErrors)
	require.Positive(t, r1.Stats().LoadReports+r2.Stats().LoadReports)
}

// TestLoadSummaryOnClusterControl publishes and reads the summary on a clustered control
// Redis: its keys share one slot.
func TestLoadSummaryOnClusterControl(t *testing.T) {
	control := celebritytest.SharedCluster(t).Client(t)
	p := prefix(t)
	ctx := testkit.Ctx(t)
	st, err := routing.NewStore(control, routing.StoreOptions{Prefix: p})
	require.NoError(t, err)
	require.NoError(t, st.Publish(ctx, routing.EvenTable(1, 8, "k")))
	r, err := routing.New(control, routing.Options{Prefix: p, Shards: map[string]routing.ShardClient{"k": control},
		Load: routing.LoadOptions{Enabled: true, Interval: 50 * time.Millisecond, Instance: "node-1"}})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	awaitGen(t, r, 1)
	_, err = r.Provision(ctx)
	require.NoError(t, err)
	for i := range 30 {
		_, err := r.Do(ctx, "t-"+strconv.Itoa(i%3), "op-"+strconv.Itoa(i), routing.Put("k", "v"))
		require.NoError(t, err)
	}
	l := awaitLoad(t, control, p, 30)
	require.Equal(t, uint64(30), l.Ops)
	require.Len(t, l.Tenants, 3)
	for _, tn := range l.Tenants {
		require.Equal(t, uint64(10), tn.Ops, tn.Tenant)
	}
}

// TestLoadReportRetriedCountsOnce replays a Router's report of one interval, as a retry
// after a lost reply would: the second is a duplicate and adds nothing.
func TestLoadReportRetriedCountsOnce(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	p := prefix(t)
	k := routing.Keys{Prefix: p}
	member := "2000:1000"
	run := func(instance string) string {
		res, err := routing.LoadScript.Run(testkit.Ctx(t), c, []string{k.LoadInterval(member), k.LoadIndex()},
			instance, "1000", "2000", "600000", "7", member, "acme", "5", "0", "beta", "2", "1").StringSlice()
		require.NoError(t, err)
		return res[0]
	}
	require.Equal(t, "ok", run("a"))
	require.Equal(t, "dup", run("a"), "the same instance's report of the same interval")
	require.Equal(t, "ok", run("b"), "another instance adds")
	l, err := routing.ReadTenantLoad(testkit.Ctx(t), c, p, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(14), l.Ops)
	require.Equal(t, 2, l.Reports)
	require.Equal(t, 1, l.Intervals)
	require.Equal(t, time.Second, l.Span())
	acme, _ := loadOf(l, "acme")
	beta, _ := loadOf(l, "beta")
	require.Equal(t, routing.TenantOps{Tenant: "acme", Ops: 10, Rate: 10}, acme)
	require.Equal(t, routing.TenantOps{Tenant: "beta", Ops: 4, Err: 2, Rate: 4}, beta)

	// Bad arguments are refused before any write.
	for name, args := range map[string][]any{
		"to before from": {"a2", "2000", "1000", "600000", "1", member},
		"ttl":            {"a2", "1000", "2000", "0", "1", member},
		"count":          {"a2", "1000", "2000", "600000", "1", member, "acme", "0", "0"},
		"triplet":        {"a2", "1000", "2000", "600000", "1", member, "acme", "1"},
		"empty tenant":   {"a2", "1000", "2000", "600000", "1", member, "", "1", "0"},
	} {
		err := routing.LoadScript.Run(testkit.Ctx(t), c, []string{k.LoadInterval(member), k.LoadIndex()}, args...).Err()
		require.ErrorContains(t, err, "routing load", name)
	}
	n, err := c.HExists(testkit.Ctx(t), k.LoadInterval(member), "r:a2").Result()
	require.NoError(t, err)
	require.False(t, n, "nothing was written")
}

// TestLoadCountingIsBounded counts many more tenants than Capacity: the Router tracks at
// most Capacity of them (memory does not grow), counts every operation, and keeps the fat
// tenant with a bounded error.
func TestLoadCountingIsBounded(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: time.Hour,
		Load: routing.LoadOptions{Enabled: true, Interval: time.Hour, Capacity: 64}}, nil)
	for i := range 20_000 {
		r.CountLoad("tenant-" + strconv.Itoa(i))
		if i%4 == 0 {
			r.CountLoad("fat")
		}
	}
	ops, tracked := r.TakeLoad()
	require.Equal(t, uint64(25_000), ops)
	require.LessOrEqual(t, tracked, 64)
	ops, tracked = r.TakeLoad()
	require.Zero(t, ops, "a take starts afresh")
	require.Zero(t, tracked)
}

// TestLoadSummaryIsOffByDefault checks that a Router without Options.Load counts and
// publishes nothing, and that the reader tells an absent summary from an empty one.
func TestLoadSummaryIsOffByDefault(t *testing.T) {
	f := newFleet(t)
	ctx := testkit.Ctx(t)
	require.NoError(t, f.store(t).Publish(ctx, routing.EvenTable(1, 4, "a")))
	r := f.router(t, routing.Options{}, nil)
	awaitGen(t, r, 1)
	_, err := r.Provision(ctx)
	require.NoError(t, err)
	_, err = r.Do(ctx, "acme", "op-1", routing.Put("k", "v"))
	require.NoError(t, err)
	l, err := routing.ReadTenantLoad(ctx, f.control, f.prefix, 0)
	require.NoError(t, err)
	require.True(t, l.Empty())
	require.Empty(t, l.Tenants)
	require.Zero(t, r.Stats().LoadReports)
}

func TestLoadOptionsAndReaderRefuseBadInput(t *testing.T) {
	f := newFleet(t)
	for name, tc := range map[string]struct {
		o    routing.LoadOptions
		want string
	}{
		"interval":  {routing.LoadOptions{Enabled: true, Interval: time.Millisecond}, "Options.Load.Interval must be 10ms..1h"},
		"capacity":  {routing.LoadOptions{Enabled: true, Capacity: 4}, "Options.Load.Capacity must be 8..65536"},
		"retention": {routing.LoadOptions{Enabled: true, Interval: time.Minute, Retention: time.Second}, "Options.Load.Retention must be"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := routing.New(f.control, routing.Options{Shards: map[string]routing.ShardClient{"a": f.clients["a"]}, Load: tc.o})
			require.ErrorIs(t, err, routing.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
	ctx := context.Background()
	_, err := routing.ReadTenantLoad(ctx, f.control, "a{b", 0)
	require.ErrorIs(t, err, routing.ErrInvalid)
	_, err = routing.ReadTenantLoad(ctx, f.control, "", -time.Second)
	require.ErrorContains(t, err, "window must be 0..168h")
	_, err = routing.ReadTenantLoad(ctx, nil, "", 0)
	require.ErrorContains(t, err, "client must not be nil")
}

// TestLoadReportsNeverHoldUpCalls kills the control Redis under a Router with the load
// summary on: its reports fail (counted in Stats.LoadErrors), while Do keeps working on the
// shards with the table it has; after a restart the Router publishes again.
func TestLoadReportsNeverHoldUpCalls(t *testing.T) {
	control := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	shard := celebritytest.Standalone(t).Client(t)
	p := prefix(t)
	cc := control.Client(t, func(o *redis.Options) { o.MaxRetries = -1; o.DialTimeout = 200 * time.Millisecond })
	st, err := routing.NewStore(cc, routing.StoreOptions{Prefix: p})
	require.NoError(t, err)
	require.NoError(t, st.Publish(testkit.Ctx(t), routing.EvenTable(1, 4, "a")))
	r, err := routing.New(cc, routing.Options{Prefix: p, Shards: map[string]routing.ShardClient{"a": shard},
		FetchTimeout: 500 * time.Millisecond, Load: routing.LoadOptions{Enabled: true, Interval: 50 * time.Millisecond}})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	awaitGen(t, r, 1)
	_, err = r.Provision(testkit.Ctx(t))
	require.NoError(t, err)

	control.Kill()
	before := r.Stats().LoadErrors
	for i := 0; r.Stats().LoadErrors == before; i++ {
		_, err := r.Do(testkit.Ctx(t), "acme", "op-"+strconv.Itoa(i), routing.Put("k", "v"))
		require.NoError(t, err, "a call does not wait for the control Redis")
		require.Less(t, i, 100_000, "no report failed while the control Redis was down")
		time.Sleep(time.Millisecond)
	}
	control.Restart(t)
	reports := r.Stats().LoadReports
	require.Eventually(t, func() bool { return r.Stats().LoadReports > reports }, 30*time.Second, 10*time.Millisecond,
		"the Router publishes again once the control Redis is back")
}
