package routing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/routing"
)

func TestPublishIsCompareAndSet(t *testing.T) {
	f := newFleet(t)
	st := f.store(t)
	ctx := testkit.Ctx(t)
	_, err := st.Load(ctx)
	require.ErrorIs(t, err, routing.ErrNoTable)

	t1 := routing.EvenTable(1, 16, "a", "b")
	require.NoError(t, st.Publish(ctx, t1))
	require.NoError(t, st.Publish(ctx, t1), "re-publishing the same table after a lost reply succeeds")
	other := routing.EvenTable(1, 16, "b", "a")
	var gc *routing.GenerationConflictError
	require.ErrorAs(t, st.Publish(ctx, other), &gc)
	require.Equal(t, uint64(1), gc.Current)
	require.ErrorIs(t, st.Publish(ctx, routing.EvenTable(3, 16, "a")), routing.ErrGenerationConflict)
	require.ErrorIs(t, st.Publish(ctx, &routing.Table{Generation: 2}), routing.ErrInvalidTable)

	t2 := t1.Next()
	t2.SetBucket(0, "b")
	require.NoError(t, st.Publish(ctx, t2))
	got, err := st.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, t2, got)
	// Moving it back is a new generation, never the old one again.
	require.ErrorIs(t, st.Publish(ctx, t1), routing.ErrGenerationConflict)
	t3 := t2.Next()
	t3.SetBucket(0, "a")
	require.NoError(t, st.Publish(ctx, t3))
	got, err = st.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(3), got.Generation)
}

func TestDoRedirectsOnceAfterBucketMoved(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
	ctx := testkit.Ctx(t)
	t1 := routing.EvenTable(1, 16, "a", "b")
	require.NoError(t, f.store(t).Publish(ctx, t1))
	awaitGen(t, r, 1)
	_, err := r.Provision(ctx)
	require.NoError(t, err)
	tenant := tenantInBucket(t, 2, 16, "course-") // bucket 2 starts on "a"
	u := routing.BucketUnit(2)

	mon := monitor(t, f, "a", "b")
	first, err := r.Do(ctx, tenant, "op-1", routing.Put("seats", "99"))
	require.NoError(t, err)

	t2 := t1.Next()
	t2.SetBucket(2, "b")
	f.moveUnit(t, u, "a", "b", 2)
	f.publishSilently(t, t2) // the router still holds generation 1
	require.Equal(t, uint64(1), r.Generation())

	before := r.Stats()
	res, err := r.Do(ctx, tenant, "op-2", routing.PutIf("seats", "98", first.Version))
	require.NoError(t, err)
	require.Equal(t, routing.Result{Applied: true, Version: 2}, res)
	after := r.Stats()
	require.Equal(t, before.Redirects+1, after.Redirects, "one redirect")
	require.Equal(t, uint64(2), after.Generation)

	// On the servers: the old owner saw op-2 and refused it, the new owner applied it once.
	require.Equal(t, 1, mon.count("a", "op-2"), "one attempt on the old owner")
	require.Equal(t, 1, mon.count("b", "op-2"), "one attempt on the new owner, same op ID")
	keys := routingfmt.Keys(routing.Keys{Prefix: f.prefix}.Tag(u))
	rec, err := f.clients["b"].HGet(ctx, keys.Records, routingfmt.RecordField(tenant, "seats")).Result()
	require.NoError(t, err)
	require.Equal(t, "2:l:98", rec)
	n, err := celebritytest.AdminOf(t, f.clients["a"]).XLen(ctx, keys.Log).Result() // XLEN is not in the rule
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the refused attempt left no change-log entry on the old owner")
	entries := logEntries(t, f.clients["b"], f.shard(t, "b"), u)
	require.Len(t, entries, 1)
	require.Equal(t, routing.OpKey(tenant, "op-2"), entries[0].OpID)
}

func TestStaleClientAfterABAIsRejected(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
	ctx := testkit.Ctx(t)
	st := f.store(t)
	t1 := routing.EvenTable(1, 4, "a", "b") // bucket 0 on a
	require.NoError(t, st.Publish(ctx, t1))
	awaitGen(t, r, 1)
	_, err := r.Provision(ctx)
	require.NoError(t, err)
	u := routing.BucketUnit(0)
	tenant := tenantInBucket(t, 0, 4, "t-")

	// A -> B (generation 2) -> A (generation 3), published silently: r keeps generation 1.
	t2 := t1.Next()
	t2.SetBucket(0, "b")
	f.moveUnit(t, u, "a", "b", 2)
	require.NoError(t, st.Publish(ctx, t2))
	awaitGen(t, r, 2)
	t3 := t2.Next()
	t3.SetBucket(0, "a")
	f.moveUnit(t, u, "b", "a", 3)
	f.publishSilently(t, t3)
	require.Equal(t, t1.Ranges, t3.Ranges, "the third table routes like the first")

	// A client still holding generation 1 or 2 cannot write anywhere.
	for _, c := range []struct {
		shard string
		gen   uint64
	}{{"a", 1}, {"b", 2}, {"a", 2}, {"b", 1}} {
		_, err := f.shard(t, c.shard).Exec(ctx, u, c.gen, tenant, "op-old", routing.Put("k", "v"))
		require.ErrorIs(t, err, routing.ErrStaleRoute, "generation %d on %s", c.gen, c.shard)
	}
	// The router holding generation 2 is refused by b, refreshes and lands on a at 3.
	res, err := r.Do(ctx, tenant, "op-new", routing.Put("k", "v"))
	require.NoError(t, err)
	require.True(t, res.Applied)
	require.Equal(t, uint64(3), r.Generation())
	require.Equal(t, uint64(1), r.Stats().Redirects)
}

func TestOlderTablesAreNeverInstalled(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: 20 * time.Millisecond}, nil)
	ctx := testkit.Ctx(t)
	tables := []*routing.Table{routing.EvenTable(1, 8, "a", "b")}
	for i := 0; i < 2; i++ {
		next := tables[i].Next()
		next.SetBucket(uint32(i), "b")
		tables = append(tables, next)
	}
	f.publishSilently(t, tables[2]) // no announcements, so the count below is exact
	awaitGen(t, r, 3)
	keys := routing.Keys{Prefix: f.prefix}
	admin := celebritytest.AdminOf(t, f.control) // PUBSUB NUMSUB is not in the rule
	require.Eventually(t, func() bool {
		n, err := admin.PubSubNumSub(ctx, keys.Channel()).Result()
		return err == nil && n[keys.Channel()] >= 1
	}, 30*time.Second, 5*time.Millisecond, "the router subscribes to announcements")

	// A delayed announcement of generation 2 is ignored.
	require.Zero(t, r.Stats().IgnoredAnnouncements)
	require.NoError(t, f.control.Publish(ctx, keys.Channel(), "2").Err())
	require.Eventually(t, func() bool { return r.Stats().IgnoredAnnouncements == 1 }, 30*time.Second, 5*time.Millisecond)
	// A control Redis that went back to generation 2 (a lagging restore) is not followed.
	f.publishSilently(t, tables[1])
	require.Eventually(t, func() bool { return r.Stats().IgnoredOlder >= 1 }, 30*time.Second, 5*time.Millisecond)
	require.Equal(t, uint64(3), r.Generation())
	rt, err := r.Route(tenantInBucket(t, 1, 8, "x"), "")
	require.NoError(t, err)
	require.Equal(t, "b", rt.Shard.Name(), "routes still follow generation 3")
	ok, err := r.Install(tables[0])
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, uint64(3), r.Generation())
}

func TestTableNamingUnknownShardIsNotInstalled(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{}, nil)
	require.NoError(t, f.store(t).Publish(testkit.Ctx(t), routing.EvenTable(1, 8, "a", "elsewhere")))
	// Await names the last fetch's error only if a fetch ended before its deadline: wait for
	// one, so a slow machine does not leave Await with nothing but its context's error.
	require.Eventually(t, func() bool { return r.Stats().FetchErrors >= 1 }, 30*time.Second, 5*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := r.Await(ctx, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, `shard "elsewhere"`)
	_, err = r.Route("x", "")
	require.ErrorIs(t, err, routing.ErrNoTable)
	require.GreaterOrEqual(t, r.Stats().FetchErrors, uint64(1))
}

func TestRouterRejectsBadInput(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{}, nil)
	ctx := testkit.Ctx(t)
	_, err := r.Route("", "k")
	require.ErrorIs(t, err, routing.ErrInvalid)
	_, err = r.Do(ctx, "", "op", routing.Put("k", "v"))
	require.ErrorIs(t, err, routing.ErrInvalid)
	_, err = r.Do(ctx, "t", "", routing.Put("k", "v"))
	require.ErrorIs(t, err, routing.ErrInvalid)
	_, err = r.Do(ctx, "t", "op", routing.Put("", "v"))
	require.ErrorIs(t, err, routing.ErrInvalid)

	for name, o := range map[string]routing.Options{
		"no shards":     {},
		"redirects":     {Shards: map[string]routing.ShardClient{"a": f.clients["a"]}, MaxRedirects: 101},
		"poll interval": {Shards: map[string]routing.ShardClient{"a": f.clients["a"]}, PollInterval: time.Nanosecond},
		"prefix":        {Shards: map[string]routing.ShardClient{"a": f.clients["a"]}, Prefix: "{x}"},
	} {
		_, err := routing.New(f.control, o)
		require.Error(t, err, name)
	}
	_, err = routing.New(f.control, routing.Options{Shards: map[string]routing.ShardClient{"a": f.clients["a"]}, MaxRedirects: 101})
	require.ErrorContains(t, err, "Options.MaxRedirects must be -1..100, got 101")

	// Reusing an op ID for another operation through Do is a conflict.
	require.NoError(t, f.store(t).Publish(ctx, routing.EvenTable(1, 4, "a")))
	awaitGen(t, r, 1)
	_, err = r.Provision(ctx)
	require.NoError(t, err)
	_, err = r.Do(ctx, "t", "op-x", routing.Put("k", "v"))
	require.NoError(t, err)
	_, err = r.Do(ctx, "t", "op-x", routing.Put("k", "w"))
	require.ErrorIs(t, err, routing.ErrConflict)
	require.False(t, errors.Is(err, routing.ErrStaleRoute))
}
