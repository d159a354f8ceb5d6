package routing_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// The course-72 scenario: a seat confirmation is applied on A, its reply is lost, the bucket
// moves to B (here the cluster), and the client retries through its stale route with the
// same op ID: it gets the original confirmation from B, and no second seat is taken.
func TestLostReplyThenMoveThenRetryReturnsOriginalResult(t *testing.T) {
	f := newFleet(t)
	inj := faults.New()
	faulty := f.servers["a"].Client(t, func(o *redis.Options) {
		o.Dialer = inj.Dialer(nil)
		o.MaxRetries = -1 // the caller sees the lost reply instead of a driver retry
	})
	r := f.router(t, routing.Options{PollInterval: time.Hour}, map[string]routing.ShardClient{"a": faulty})
	ctx := testkit.Ctx(t)
	t1 := routing.EvenTable(1, 16, "a", "k")
	require.NoError(t, f.store(t).Publish(ctx, t1))
	awaitGen(t, r, 1)
	_, err := r.Provision(ctx)
	require.NoError(t, err)
	course := tenantInBucket(t, 3, 16, "course-72/") // bucket 3 is on "a"
	u := routing.BucketUnit(3)
	_, err = r.Do(ctx, course, "warm-up", routing.Put("title", "Popular course"))
	require.NoError(t, err)

	confirm := routing.PutIf("seat:12", "student-7", 0)
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "confirm-7"}, 1)
	_, err = r.Do(ctx, course, "confirm-7", confirm)
	require.Error(t, err, "the reply was lost")
	require.Equal(t, int64(1), inj.Dropped())
	keys := routingfmt.Keys(routing.Keys{Prefix: f.prefix}.Tag(u))
	field := routingfmt.RecordField(course, "seat:12")
	onA, err := f.clients["a"].HGet(ctx, keys.Records, field).Result()
	require.NoError(t, err)
	require.Equal(t, "1:l:student-7", onA, "the confirmation was applied on A before the reply was lost")

	t2 := t1.Next()
	t2.SetBucket(3, "k")
	f.moveUnit(t, u, "a", "k", 2)
	f.publishSilently(t, t2) // the client keeps its generation-1 route

	res, err := r.Do(ctx, course, "confirm-7", confirm)
	require.NoError(t, err)
	require.Equal(t, routing.Result{Applied: true, Version: 1, Replayed: true}, res,
		"the retry gets the original confirmation from the new owner")
	require.Equal(t, uint64(1), r.Stats().Redirects)

	_, err = r.Do(ctx, course, "confirm-8", routing.PutIf("seat:12", "student-8", 0))
	require.ErrorIs(t, err, routing.ErrVersionMismatch, "the seat is taken once")
	admin := celebritytest.AdminOf(t, f.clients["k"]) // XLEN is not in the rule
	onB, err := admin.HGet(ctx, keys.Records, field).Result()
	require.NoError(t, err)
	require.Equal(t, "1:l:student-7", onB)
	n, err := admin.XLen(ctx, keys.Log).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "B logged only the refused second student; the replay logged nothing")
}

// moveSilently moves unit u from one shard to another at the next generation and stores
// the new table without announcing it.
func moveSilently(t testing.TB, f *testFleet, tb *routing.Table, b uint32, to string) *routing.Table {
	t.Helper()
	next := tb.Next()
	next.SetBucket(b, to)
	f.moveUnit(t, routing.BucketUnit(b), tb.BucketOwner(b), to, next.Generation)
	f.publishSilently(t, next)
	return next
}

func TestThousandStaleCallersShareTheirFetches(t *testing.T) {
	const callers = 1000
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
	ctx := testkit.Ctx(t)
	tb := routing.EvenTable(1, 8, "a", "b")
	tb.Shards = shardNames // c and k hold nothing yet
	require.NoError(t, f.store(t).Publish(ctx, tb))
	awaitGen(t, r, 1)
	_, err := r.Provision(ctx)
	require.NoError(t, err)
	tenant := tenantInBucket(t, 1, 8, "crowd-")
	tb = moveSilently(t, f, tb, 1, "c")

	// Every caller routes by generation 1, then all write at once: all are refused.
	routes := make([]routing.Route, callers)
	for i := range routes {
		routes[i], err = r.Route(tenant, "k")
		require.NoError(t, err)
		require.Equal(t, uint64(1), routes[i].Generation)
	}
	before := r.Stats().Fetches
	var stale, applied atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			id, key := "op-"+strconv.Itoa(i), "k"+strconv.Itoa(i)
			rt := routes[i]
			_, err := rt.Shard.Exec(ctx, rt.Unit, rt.Generation, tenant, id, routing.Put(key, "v"))
			if !assertStale(t, err) {
				return
			}
			stale.Add(1)
			if _, err := r.Await(ctx, rt.Generation+1); err != nil {
				t.Errorf("await: %v", err)
				return
			}
			rt, err = r.Route(tenant, key)
			if err == nil {
				_, err = rt.Shard.Exec(ctx, rt.Unit, rt.Generation, tenant, id, routing.Put(key, "v"))
			}
			if err != nil {
				t.Errorf("retry: %v", err)
				return
			}
			applied.Add(1)
		}()
	}
	close(start)
	wg.Wait()
	require.Equal(t, int64(callers), stale.Load())
	require.Equal(t, int64(callers), applied.Load())
	fetches := r.Stats().Fetches - before
	t.Logf("%d stale callers caused %d table fetches", callers, fetches)
	require.LessOrEqual(t, fetches, uint64(2), "%d stale callers caused %d fetches", callers, fetches)
	require.GreaterOrEqual(t, fetches, uint64(1))
	n, err := celebritytest.AdminOf(t, f.clients["c"]).HLen(ctx, routingfmt.Keys(routing.Keys{Prefix: f.prefix}.Tag(routing.BucketUnit(1))).Records).Result()
	require.NoError(t, err)
	require.Equal(t, int64(callers), n)

	// The same through Do: move the bucket again, 1000 concurrent Do calls.
	moveSilently(t, f, tb, 1, "a")
	before = r.Stats().Fetches
	redirects := r.Stats().Redirects
	start = make(chan struct{})
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := r.Do(ctx, tenant, "do-"+strconv.Itoa(i), routing.Put("d"+strconv.Itoa(i), "v"))
			if err != nil || !res.Applied || res.Version != 1 {
				t.Errorf("do %d: %+v %v", i, res, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	fetches = r.Stats().Fetches - before
	t.Logf("%d concurrent Do callers after a move caused %d table fetches, %d redirects", callers, fetches, r.Stats().Redirects-redirects)
	require.LessOrEqual(t, fetches, uint64(2), "%d Do callers caused %d fetches", callers, fetches)
	require.Greater(t, r.Stats().Redirects, redirects)
	require.Equal(t, uint64(3), r.Generation())
}

func assertStale(t *testing.T, err error) bool {
	if err == nil || !isStale(err) {
		t.Errorf("want ErrStaleRoute, got %v", err)
		return false
	}
	return true
}

func TestControlUnreachableFailsWithinDeadline(t *testing.T) {
	f := newFleet(t)
	inj := faults.New()
	srvs := celebritytest.Shards(t, 4)
	control := srvs[3].Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil) })
	shards := map[string]routing.ShardClient{}
	for name, c := range f.clients {
		shards[name] = c
	}
	r, err := routing.New(control, routing.Options{Prefix: f.prefix, Shards: shards, PollInterval: time.Hour,
		FetchTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	ctx := testkit.Ctx(t)
	tb := routing.EvenTable(1, 8, "a", "b")
	require.NoError(t, f.store(t).Publish(ctx, tb))
	awaitGen(t, r, 1)
	_, err = r.Provision(ctx)
	require.NoError(t, err)
	tenant := tenantInBucket(t, 0, 8, "lonely-")
	moveSilently(t, f, tb, 0, "b")

	inj.Blackhole(true)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = r.Do(short, tenant, "op-1", routing.Put("k", "v"))
	require.ErrorIs(t, err, routing.ErrStaleRoute)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, uint64(1), r.Generation(), "no table was invented")
	keys := routingfmt.Keys(routing.Keys{Prefix: f.prefix}.Tag(routing.BucketUnit(0)))
	for _, name := range []string{"a", "b"} {
		n, err := celebritytest.AdminOf(t, f.clients[name]).HLen(ctx, keys.Records).Result()
		require.NoError(t, err)
		require.Zero(t, n, "nothing written on %s while the route could not be refreshed", name)
	}

	inj.Blackhole(false)
	inj.ResetAll()
	res, err := r.Do(ctx, tenant, "op-1", routing.Put("k", "v"))
	require.NoError(t, err)
	require.Equal(t, routing.Result{Applied: true, Version: 1}, res)
	require.Equal(t, uint64(2), r.Generation())
}
