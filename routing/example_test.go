package routing_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/routing"
)

func ExampleEvenTable() {
	t := routing.EvenTable(1, 1024, "a", "b", "c")
	t.SetOverride("fat-merchant", "c")
	t.SetSpread("viral", []string{"a", "b", "c", "a"})
	fmt.Println(t.Validate())
	for _, r := range t.Ranges {
		fmt.Printf("%d..%d -> %s\n", r.First, r.Last, r.Shard)
	}
	// Output:
	// <nil>
	// 0..341 -> a
	// 342..682 -> b
	// 683..1023 -> c
}

func ExampleTable_Validate() {
	t := routing.EvenTable(7, 16, "a", "b")
	t.Ranges[1].First = 9 // bucket 8 loses its owner
	err := t.Validate()
	fmt.Println(errors.Is(err, routing.ErrInvalidTable))
	fmt.Println(err)
	// Output:
	// true
	// routing: invalid table: buckets 8..8 are unowned
}

// exampleFleet is the examples' deployment: a control Redis and two shards, "a" (on the
// control server) and "b", under a prefix of their own so that every run starts empty.
type exampleFleet struct {
	prefix  string
	control *redis.Client
	shards  map[string]routing.ShardClient
}

func newExampleFleet() exampleFleet {
	control := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	return exampleFleet{
		prefix:  fmt.Sprintf("example:%d", time.Now().UnixNano()),
		control: control,
		shards: map[string]routing.ShardClient{
			"a": control,
			"b": redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_SHARD_B_ADDR")}),
		},
	}
}

func (f exampleFleet) close() {
	_ = f.control.Close()
	_ = f.shards["b"].(*redis.Client).Close()
}

// router returns a Router over the fleet, with the first table (16 buckets, half on each
// shard) published and provisioned, and a func that closes it and the fleet.
func (f exampleFleet) router(o routing.Options) (*routing.Router, func()) {
	o.Shards, o.Prefix = f.shards, f.prefix
	r, err := routing.New(f.control, o)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := r.Store().Publish(ctx, routing.EvenTable(1, 16, "a", "b")); err != nil {
		panic(err)
	}
	if _, err := r.Await(ctx, 1); err != nil {
		panic(err)
	}
	if _, err := r.Provision(ctx); err != nil {
		panic(err)
	}
	return r, func() { _ = r.Close(); f.close() }
}

// exampleRouter is exampleFleet's router over a new fleet.
func exampleRouter() (*routing.Router, func()) { return newExampleFleet().router(routing.Options{}) }

func ExampleNew() {
	control := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer control.Close()
	shardB := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_SHARD_B_ADDR")})
	defer shardB.Close()
	r, err := routing.New(control, routing.Options{
		Shards: map[string]routing.ShardClient{
			"a": control, // a shard is any go-redis client: a server or a whole cluster
			"b": shardB,
		},
		Prefix: fmt.Sprintf("example:%d", time.Now().UnixNano()), // fresh keys per run
	})
	if err != nil {
		panic(err)
	}
	defer r.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Bootstrapping: publish the first table, wait for it, open its units on their shards.
	if err := r.Store().Publish(ctx, routing.EvenTable(1, 1024, "a", "b")); err != nil {
		panic(err)
	}
	if _, err := r.Await(ctx, 1); err != nil {
		panic(err)
	}
	if _, err := r.Provision(ctx); err != nil {
		panic(err)
	}

	// The operation ID identifies this intent across retries and redirects.
	for range 2 {
		res, err := r.Do(ctx, "course-72", "confirm-seat-12-student-7", routing.PutIf("seat:12", "student-7", 0))
		switch {
		case errors.Is(err, routing.ErrVersionMismatch):
			fmt.Println("seat already taken")
		case err != nil:
			fmt.Println("unknown outcome, retry with the same operation ID:", err)
		default:
			fmt.Println("confirmed at version", res.Version, "replayed:", res.Replayed)
		}
	}
	// Output:
	// confirmed at version 1 replayed: false
	// confirmed at version 1 replayed: true
}

// Do applies one operation on the owning shard; a retry with the same operation ID returns
// the first result, and a conditional write that finds another version changes nothing.
func ExampleRouter_Do() {
	r, done := exampleRouter()
	defer done()
	ctx := context.Background()

	res, err := r.Do(ctx, "acme", "op-1", routing.PutIf("seat:12", "alice", 0))
	fmt.Println(res, err)
	res, err = r.Do(ctx, "acme", "op-1", routing.PutIf("seat:12", "alice", 0)) // a retry
	fmt.Println(res, err)
	_, err = r.Do(ctx, "acme", "op-2", routing.PutIf("seat:12", "bob", 0))
	var vm *routing.VersionMismatchError
	fmt.Println(errors.As(err, &vm), vm.Expected, vm.Current)
	_, err = r.Do(ctx, "acme", "op-1", routing.Put("seat:12", "carol")) // op-1 reused
	fmt.Println(errors.Is(err, routing.ErrConflict))
	res, err = r.Do(ctx, "acme", "op-3", routing.DeleteIf("seat:12", 1))
	fmt.Println(res, err)
	// Output:
	// {true 1 false} <nil>
	// {true 1 true} <nil>
	// true 0 1
	// true
	// {true 2 false} <nil>
}

// Get reads a record from the shard that owns it; a tombstone is a record with Deleted set.
func ExampleRouter_Get() {
	r, done := exampleRouter()
	defer done()
	ctx := context.Background()

	_, _ = r.Do(ctx, "acme", "op-1", routing.Put("seat:12", "alice"))
	fmt.Println(r.Get(ctx, "acme", "seat:12"))
	_, _ = r.Do(ctx, "acme", "op-2", routing.Delete("seat:12"))
	fmt.Println(r.Get(ctx, "acme", "seat:12"))
	fmt.Println(r.Get(ctx, "acme", "seat:13"))
	// Output:
	// {1 false alice} true <nil>
	// {2 true } true <nil>
	// {0 false } false <nil>
}

// Route resolves a tenant's key in memory: by hash bucket, override or spread.
func ExampleRouter_Route() {
	f := newExampleFleet()
	r, done := f.router(routing.Options{})
	defer done()
	ctx := context.Background()

	next := r.Table().Next()
	next.SetOverride("fat-merchant", "b")
	if err := r.Store().Publish(ctx, next); err != nil {
		panic(err)
	}
	if _, err := r.Await(ctx, 2); err != nil {
		panic(err)
	}
	for _, tenant := range []string{"acme", "fat-merchant"} {
		rt, err := r.Route(tenant, "seat:12")
		if err != nil {
			panic(err)
		}
		fmt.Println(tenant, "->", rt.Unit, "on", rt.Shard.Name(), "at generation", rt.Generation)
	}
	// Output:
	// acme -> bucket 12 on b at generation 2
	// fat-merchant -> tenant "fat-merchant" on b at generation 2
}

// Await waits for a table of at least a generation, for example the one a host just
// published.
func ExampleRouter_Await() {
	f := newExampleFleet()
	defer f.close()
	r, err := routing.New(f.control, routing.Options{Shards: f.shards, Prefix: f.prefix})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	_, err = r.Route("acme", "k")
	fmt.Println(errors.Is(err, routing.ErrNoTable))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Store().Publish(ctx, routing.EvenTable(1, 16, "a", "b")); err != nil {
		panic(err)
	}
	fmt.Println(r.Await(ctx, 1))
	// Output:
	// true
	// 1 <nil>
}

// Provision opens every unit of the first table on its shard; it is idempotent.
func ExampleRouter_Provision() {
	f := newExampleFleet()
	defer f.close()
	r, err := routing.New(f.control, routing.Options{Shards: f.shards, Prefix: f.prefix})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	ctx := context.Background()
	if err := r.Store().Publish(ctx, routing.EvenTable(1, 16, "a", "b")); err != nil {
		panic(err)
	}
	if _, err := r.Await(ctx, 1); err != nil {
		panic(err)
	}
	fmt.Println(r.Provision(ctx))
	fmt.Println(r.Provision(ctx))
	// Output:
	// 16 <nil>
	// 0 <nil>
}

// NewStore, Load and Publish: generations are published by compare-and-set, exactly
// current + 1; the same table again (a retry after a lost reply) succeeds.
func ExampleNewStore() {
	f := newExampleFleet()
	defer f.close()
	store, err := routing.NewStore(f.control, routing.StoreOptions{Prefix: f.prefix})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	_, err = store.Load(ctx)
	fmt.Println(errors.Is(err, routing.ErrNoTable))
	t := routing.EvenTable(1, 16, "a", "b")
	fmt.Println(store.Publish(ctx, t), store.Publish(ctx, t))
	cur, err := store.Load(ctx)
	fmt.Println(cur.Generation, err)
	// Output:
	// true
	// <nil> <nil>
	// 1 <nil>
}

// Load returns the current table, the starting point of the next one.
func ExampleStore_Load() {
	f := newExampleFleet()
	defer f.close()
	store, err := routing.NewStore(f.control, routing.StoreOptions{Prefix: f.prefix})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := store.Publish(ctx, routing.EvenTable(1, 16, "a", "b")); err != nil {
		panic(err)
	}
	cur, err := store.Load(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(cur.Generation, cur.Buckets, cur.Shards, cur.Ranges)
	// Output:
	// 1 16 [a b] [{0 7 a} {8 15 b}]
}

func ExampleStore_Publish() {
	f := newExampleFleet()
	defer f.close()
	store, err := routing.NewStore(f.control, routing.StoreOptions{Prefix: f.prefix})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := store.Publish(ctx, routing.EvenTable(1, 16, "a", "b")); err != nil {
		panic(err)
	}

	cur, err := store.Load(ctx)
	if err != nil {
		panic(err)
	}
	next := cur.Next() // generation + 1
	next.SetOverride("fat-merchant", "b")
	fmt.Println(store.Publish(ctx, next))
	var conflict *routing.GenerationConflictError
	if err := store.Publish(ctx, cur.Next()); errors.As(err, &conflict) {
		fmt.Println("someone else published generation", conflict.Current)
	}
	// Output:
	// <nil>
	// someone else published generation 2
}

// PublishGuarded publishes only while a guard hash in the table's slot holds given values:
// a migration driver's epoch, so that a driver that lost its turn cannot publish.
func ExampleStore_PublishGuarded() {
	f := newExampleFleet()
	defer f.close()
	store, err := routing.NewStore(f.control, routing.StoreOptions{Prefix: f.prefix})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := store.Publish(ctx, routing.EvenTable(1, 16, "a", "b")); err != nil {
		panic(err)
	}
	guard := store.Keys().ControlTag() + ":driver"
	if err := f.control.HSet(ctx, guard, "epoch", "7").Err(); err != nil {
		panic(err)
	}

	next := routing.EvenTable(2, 16, "a", "b")
	next.SetBucket(0, "b")
	err = store.PublishGuarded(ctx, next, guard, map[string]string{"epoch": "6"}) // an older driver
	fmt.Println(errors.Is(err, routing.ErrFenced))
	fmt.Println(store.PublishGuarded(ctx, next, guard, map[string]string{"epoch": "7"}))
	// Output:
	// true
	// <nil>
}

// exampleShard returns shard "a" of a new fleet, with unit u open on it at generation 1.
func exampleShard(u routing.Unit) (*routing.Shard, func()) {
	f := newExampleFleet()
	a, err := routing.NewShard("a", f.shards["a"], routing.ShardOptions{Prefix: f.prefix})
	if err != nil {
		panic(err)
	}
	open := routing.Ownership{Generation: 1, State: routing.StateOpen}
	if _, err := a.Transition(context.Background(), u, routing.Ownership{}, open); err != nil {
		panic(err)
	}
	return a, f.close
}

// A Shard is the shard side: the ownership records and the guarded record store. Exec and
// Get carry the route generation the caller used.
func ExampleNewShard() {
	f := newExampleFleet()
	defer f.close()
	a, err := routing.NewShard("a", f.shards["a"], routing.ShardOptions{Prefix: f.prefix})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	u := routing.BucketUnit(routing.BucketOf("acme", 16))

	_, err = a.Exec(ctx, u, 1, "acme", "op-1", routing.Put("seat:12", "alice"))
	fmt.Println(errors.Is(err, routing.ErrStaleRoute)) // no ownership record yet
	_, err = a.Transition(ctx, u, routing.Ownership{}, routing.Ownership{Generation: 1, State: routing.StateOpen})
	fmt.Println(err)
	fmt.Println(a.Exec(ctx, u, 1, "acme", "op-1", routing.Put("seat:12", "alice")))
	// Output:
	// true
	// <nil>
	// {true 1 false} <nil>
}

// Exec admits a write routed by a generation at or after the unit's opening, and refuses
// an older one with ErrStaleRoute.
func ExampleShard_Exec() {
	f := newExampleFleet()
	defer f.close()
	a, err := routing.NewShard("a", f.shards["a"], routing.ShardOptions{Prefix: f.prefix})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	u := routing.BucketUnit(routing.BucketOf("acme", 16))
	if _, err := a.Transition(ctx, u, routing.Ownership{}, routing.Ownership{Generation: 5, State: routing.StateOpen}); err != nil {
		panic(err)
	}

	fmt.Println(a.Exec(ctx, u, 5, "acme", "op-1", routing.Put("seat:12", "alice")))
	_, err = a.Exec(ctx, u, 4, "acme", "op-2", routing.Put("seat:12", "bob"))
	var stale *routing.StaleRouteError
	fmt.Println(errors.As(err, &stale), stale.Sent, stale.Owner)
	// Output:
	// {true 1 false} <nil>
	// true 4 gen 5 open
}

// Get reads a record where the unit is open; the closed old owner refuses the read.
func ExampleShard_Get() {
	u := routing.BucketUnit(routing.BucketOf("acme", 16))
	a, done := exampleShard(u)
	defer done()
	ctx := context.Background()

	_, _ = a.Exec(ctx, u, 1, "acme", "op-1", routing.Put("seat:12", "alice"))
	fmt.Println(a.Get(ctx, u, 1, "acme", "seat:12"))
	open, closed := routing.Ownership{Generation: 1, State: routing.StateOpen}, routing.Ownership{Generation: 1, State: routing.StateClosed}
	_, _ = a.Transition(ctx, u, open, closed)
	_, _, err := a.Get(ctx, u, 1, "acme", "seat:12")
	fmt.Println(errors.Is(err, routing.ErrStaleRoute))
	// Output:
	// {1 false alice} true <nil>
	// true
}

// A migration closes the unit on the old owner with one script; the returned change-log ID
// is final, because the closed unit refuses every later write.
func ExampleShard_Transition() {
	u := routing.BucketUnit(4)
	a, done := exampleShard(u)
	defer done()
	ctx := context.Background()
	_, _ = a.Exec(ctx, u, 1, "acme", "op-1", routing.Put("seat:12", "alice"))

	open := routing.Ownership{Generation: 1, State: routing.StateOpen}
	closed := routing.Ownership{Generation: 1, State: routing.StateClosed}
	last, err := a.Transition(ctx, u, open, closed)
	fmt.Println(last != "0-0", err)
	again, err := a.Transition(ctx, u, open, closed) // a retry after a lost reply
	fmt.Println(again == last, err)
	_, err = a.Transition(ctx, u, open, routing.Ownership{Generation: 2, State: routing.StateOpen})
	fmt.Println(errors.Is(err, routing.ErrOwnershipChanged)) // the record is closed, not open
	_, err = a.Exec(ctx, u, 1, "acme", "op-2", routing.Put("seat:13", "bob"))
	fmt.Println(errors.Is(err, routing.ErrStaleRoute))
	// Output:
	// true <nil>
	// true <nil>
	// true
	// true
}

// TransitionFenced carries the actor's fencing epoch: once a later actor acted on the
// record, an earlier one is refused in the same script.
func ExampleShard_TransitionFenced() {
	u := routing.BucketUnit(4)
	a, done := exampleShard(u)
	defer done()
	ctx := context.Background()

	open := routing.Ownership{Generation: 1, State: routing.StateOpen}
	closed := routing.Ownership{Generation: 1, State: routing.StateClosed}
	_, err := a.TransitionFenced(ctx, u, open, closed, 2) // the current driver, epoch 2
	fmt.Println(err)
	_, err = a.TransitionFenced(ctx, u, closed, open, 1) // a driver that lost its turn
	var fenced *routing.FencedError
	fmt.Println(errors.As(err, &fenced), fenced.Epoch, fenced.Fence)
	// Output:
	// <nil>
	// true 1 2
}

// MarkMoved marks one tenant as moved out of its bucket: the bucket then refuses that
// tenant, and Ownership lists it.
func ExampleShard_MarkMoved() {
	u := routing.BucketUnit(routing.BucketOf("fat-merchant", 16))
	a, done := exampleShard(u)
	defer done()
	ctx := context.Background()

	open := routing.Ownership{Generation: 1, State: routing.StateOpen}
	_, err := a.MarkMoved(ctx, u, "fat-merchant", true, open, open)
	fmt.Println(err)
	_, err = a.Exec(ctx, u, 1, "fat-merchant", "op-1", routing.Put("k", "v"))
	var stale *routing.StaleRouteError
	fmt.Println(errors.As(err, &stale), stale.Moved)
	// Output:
	// <nil>
	// true true
}

// MarkMovedFenced is MarkMoved for an actor with a fencing epoch.
func ExampleShard_MarkMovedFenced() {
	u := routing.BucketUnit(routing.BucketOf("fat-merchant", 16))
	a, done := exampleShard(u)
	defer done()
	ctx := context.Background()

	open := routing.Ownership{Generation: 1, State: routing.StateOpen}
	_, err := a.MarkMovedFenced(ctx, u, "fat-merchant", true, open, open, 3)
	fmt.Println(err)
	_, err = a.MarkMovedFenced(ctx, u, "fat-merchant", false, open, open, 2) // an older driver
	fmt.Println(errors.Is(err, routing.ErrFenced))
	// Output:
	// <nil>
	// true
}

// Ownership reads a unit's record on a shard and the tenants marked as moved out of it.
func ExampleShard_Ownership() {
	u := routing.BucketUnit(routing.BucketOf("fat-merchant", 16))
	a, done := exampleShard(u)
	defer done()
	ctx := context.Background()

	open := routing.Ownership{Generation: 1, State: routing.StateOpen}
	fmt.Println(a.Ownership(ctx, u))
	_, _ = a.MarkMoved(ctx, u, "fat-merchant", true, open, open)
	fmt.Println(a.Ownership(ctx, u))
	fmt.Println(a.Ownership(ctx, routing.BucketUnit(99)))
	// Output:
	// gen 1 open map[] <nil>
	// gen 1 open map[fat-merchant:1] <nil>
	// none map[] <nil>
}

// Next copies a table at the following generation, to be changed and published.
func ExampleTable_Next() {
	cur := routing.EvenTable(7, 16, "a", "b")
	next := cur.Next()
	next.SetBucket(15, "a")
	fmt.Println(cur.Generation, cur.Ranges)
	fmt.Println(next.Generation, next.Ranges, next.Validate())
	// Output:
	// 7 [{0 7 a} {8 15 b}]
	// 8 [{0 7 a} {8 14 b} {15 15 a}] <nil>
}

// SetBucket reassigns one bucket, rewriting the ranges.
func ExampleTable_SetBucket() {
	t := routing.EvenTable(1, 16, "a", "b", "c")
	t.SetBucket(0, "c")
	fmt.Println(t.Ranges, t.BucketOwner(0), t.Validate())
	// Output:
	// [{0 0 c} {1 5 a} {6 10 b} {11 15 c}] c <nil>
}

// SetOverride places one tenant on a shard of its own choosing.
func ExampleTable_SetOverride() {
	t := routing.EvenTable(1, 16, "a", "b", "c")
	t.SetOverride("fat-merchant", "c")
	fmt.Println(t.Owner(routing.TenantUnit("fat-merchant")), t.Overrides)
	t.SetOverride("fat-merchant", "") // removes it
	fmt.Println(t.Owner(routing.TenantUnit("fat-merchant")) == "", len(t.Overrides))
	// Output:
	// c map[fat-merchant:c]
	// true 0
}

// SetSpread spreads one tenant over sub-buckets, each on a shard.
func ExampleTable_SetSpread() {
	t := routing.EvenTable(1, 16, "a", "b", "c")
	t.SetSpread("viral", []string{"a", "b", "c", "a"})
	for sub := range uint32(4) {
		fmt.Print(t.Owner(routing.SpreadUnit("viral", sub)), " ")
	}
	fmt.Println(t.Validate())
	// Output:
	// a b c a <nil>
}

// Owner says which shard a table assigns a unit to.
func ExampleTable_Owner() {
	t := routing.EvenTable(1, 16, "a", "b")
	t.SetOverride("fat-merchant", "b")
	fmt.Println(t.Owner(routing.BucketUnit(0)), t.Owner(routing.BucketUnit(15)))
	fmt.Println(t.Owner(routing.TenantUnit("fat-merchant")))
	fmt.Printf("%q\n", t.Owner(routing.TenantUnit("nobody")))
	// Output:
	// a b
	// b
	// ""
}

// ReadTenantLoad reads the per-tenant load the Routers publish (Options.Load), without a
// Router: which tenants are busiest, for a placement decision.
func ExampleReadTenantLoad() {
	f := newExampleFleet()
	r, done := f.router(routing.Options{Load: routing.LoadOptions{Enabled: true, Interval: 100 * time.Millisecond}})
	defer done()
	ctx := context.Background()

	for i, tenant := range []string{"acme", "acme", "acme", "globex"} {
		if _, err := r.Do(ctx, tenant, fmt.Sprint("op-", i), routing.Put("k", "v")); err != nil {
			panic(err)
		}
	}

	// The Routers publish each interval just after it ends: wait for all four operations.
	var load routing.TenantLoad
	for deadline := time.Now().Add(30 * time.Second); load.Ops < 4; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			panic("the load summary was never published")
		}
		var err error
		if load, err = routing.ReadTenantLoad(ctx, f.control, f.prefix, time.Hour); err != nil {
			panic(err)
		}
	}
	for _, t := range load.Tenants {
		fmt.Println(t.Tenant, t.Ops)
	}
	// Output:
	// acme 3
	// globex 1
}
