package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// The examples run on three of the kit's shared servers (started by the first example that
// needs them, stopped by celebritytest.Main in TestMain): the control Redis, shard "a" and
// shard "b". Each example works under a routing prefix of its own, with the first table (16
// buckets, half on each shard) published and provisioned.

// exampleEnv is one example's deployment: the control Redis, the shards' clients and a
// Router over them, under a prefix of its own.
type exampleEnv struct {
	prefix  string
	control *redis.Client
	a, b    *redis.Client
	router  *routing.Router
}

func newExampleEnv() *exampleEnv {
	srv := celebritytest.Shards(celebritytest.ForMain(), 3) // an example has no *testing.T
	e := &exampleEnv{
		prefix:  fmt.Sprintf("example:%d", time.Now().UnixNano()),
		control: redis.NewClient(&redis.Options{Addr: srv[0].Addr()}),
		a:       redis.NewClient(&redis.Options{Addr: srv[1].Addr()}),
		b:       redis.NewClient(&redis.Options{Addr: srv[2].Addr()}),
	}
	r, err := routing.New(e.control, routing.Options{
		Shards: map[string]routing.ShardClient{"a": e.a, "b": e.b},
		Prefix: e.prefix,
	})
	if err != nil {
		panic(err)
	}
	e.router = r
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
	return e
}

func (e *exampleEnv) close() {
	_ = e.router.Close()
	_ = e.control.Close()
	_ = e.a.Close()
	_ = e.b.Close()
}

// coordinator returns a Coordinator over the env (a new one stands for another process).
func (e *exampleEnv) coordinator(o migrate.Options) *migrate.Coordinator {
	o.Shards = map[string]migrate.ShardClient{"a": e.a, "b": e.b}
	o.Prefix = e.prefix
	co, err := migrate.New(e.control, o)
	if err != nil {
		panic(err)
	}
	return co
}

// bucket returns tenant's hash bucket and the shard that does not own it.
func (e *exampleEnv) bucket(tenant string) (u routing.Unit, other string) {
	u = routing.BucketUnit(routing.BucketOf(tenant, 16))
	if e.router.Table().Owner(u) == "a" {
		return u, "b"
	}
	return u, "a"
}

// write stores n seats of tenant through the Router.
func (e *exampleEnv) write(tenant string, n int) {
	for i := range n {
		op := routing.Put(fmt.Sprint("seat:", i), fmt.Sprint("student-", i))
		if _, err := e.router.Do(context.Background(), tenant, fmt.Sprint(tenant, "-op-", i), op); err != nil {
			panic(err)
		}
	}
}

// get reads tenant's seat through the Router, which follows the unit to its new owner.
func (e *exampleEnv) get(tenant, key string) string {
	rec, ok, err := e.router.Get(context.Background(), tenant, key)
	if err != nil || !ok {
		return fmt.Sprint("no record: ", err)
	}
	return rec.Value
}

// New takes the control Redis (route table and journal) and the shards, named as the route
// table names them.
func ExampleNew() {
	e := newExampleEnv()
	defer e.close()

	co, err := migrate.New(e.control, migrate.Options{
		Shards: map[string]migrate.ShardClient{"a": e.a, "b": e.b},
		Prefix: e.prefix, // routing's prefix
	})
	if err != nil {
		panic(err)
	}
	u, target := e.bucket("course-72")
	st, err := co.Migrate(context.Background(), migrate.Spec{Unit: u, Target: target})
	fmt.Println(st.State, err)

	_, err = migrate.New(e.control, migrate.Options{})
	fmt.Println(errors.Is(err, migrate.ErrInvalid))
	// Output:
	// OwnedB <nil>
	// true
}

// A hot course's bucket moves to the other shard; the control Redis holds the route table
// and the journal.
func ExampleCoordinator_Migrate() {
	e := newExampleEnv()
	defer e.close()
	e.write("course-72", 3)
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	u, target := e.bucket("course-72")
	st, err := co.Migrate(ctx, migrate.Spec{ID: "move-course-72", Unit: u, Target: target})
	switch {
	case err == nil:
		fmt.Println(st.State, "at generation", st.FlipGen, "records:", st.Digest.Records)
	case errors.Is(err, migrate.ErrAborted):
		fmt.Println("aborted, the source still owns the bucket:", st.Reason)
	default:
		// The driver stopped (process shutdown, network): any coordinator continues it.
		st, err = co.Resume(ctx, "move-course-72")
		fmt.Println(st.State, err)
	}
	fmt.Println(e.get("course-72", "seat:2"), e.router.Table().Owner(u) == target)
	// Output:
	// OwnedB at generation 2 records: 3
	// student-2 true
}

// Start journals a migration and takes the unit's lock without touching the shards; a
// retried Start returns the same migration, and another migration of the unit is refused.
func ExampleCoordinator_Start() {
	e := newExampleEnv()
	defer e.close()
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	u, target := e.bucket("course-72")
	st, err := co.Start(ctx, migrate.Spec{ID: "m-1", Unit: u, Target: target})
	fmt.Println(st.State, err)
	st, err = co.Start(ctx, migrate.Spec{ID: "m-1", Unit: u, Target: target}) // a retry
	fmt.Println(st.State, err)
	_, err = co.Start(ctx, migrate.Spec{ID: "m-2", Unit: u, Target: target})
	fmt.Println(errors.Is(err, migrate.ErrBusy))
	st, err = co.Resume(ctx, "m-1")
	fmt.Println(st.State, err)
	// Output:
	// OwnedA <nil>
	// OwnedA <nil>
	// true
	// OwnedB <nil>
}

// Resume drives a migration from its journal, here in a process other than the one that
// started it (the first one died).
func ExampleCoordinator_Resume() {
	e := newExampleEnv()
	defer e.close()
	e.write("course-72", 2)
	ctx := context.Background()

	u, target := e.bucket("course-72")
	if _, err := e.coordinator(migrate.Options{}).Start(ctx, migrate.Spec{ID: "m-1", Unit: u, Target: target}); err != nil {
		panic(err)
	}
	// ... the process that started it dies; another one takes over.
	co := e.coordinator(migrate.Options{})
	st, err := co.Resume(ctx, "m-1")
	fmt.Println(st.State, st.Digest.Records, err)
	fmt.Println(e.get("course-72", "seat:1"))
	// Output:
	// OwnedB 2 <nil>
	// student-1
}

// Cancel returns the unit to its source while the source is still open; a second Cancel
// returns the same status.
func ExampleCoordinator_Cancel() {
	e := newExampleEnv()
	defer e.close()
	e.write("course-72", 1)
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	u, target := e.bucket("course-72")
	if _, err := co.Start(ctx, migrate.Spec{ID: "m-1", Unit: u, Target: target}); err != nil {
		panic(err)
	}
	st, err := co.Cancel(ctx, "m-1")
	fmt.Println(st.State, err)
	st, err = co.Cancel(ctx, "m-1")
	fmt.Println(st.State, err)
	_, err = co.Resume(ctx, "m-1")
	fmt.Println(errors.Is(err, migrate.ErrCancelled))
	fmt.Println(e.get("course-72", "seat:0"), e.router.Table().Owner(u) != target)
	// Output:
	// Cancelled <nil>
	// Cancelled <nil>
	// true
	// student-0 true
}

// Status reads a migration's journal record.
func ExampleCoordinator_Status() {
	e := newExampleEnv()
	defer e.close()
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	u, target := e.bucket("course-72")
	if _, err := co.Migrate(ctx, migrate.Spec{ID: "m-1", Unit: u, Target: target}); err != nil {
		panic(err)
	}
	st, err := co.Status(ctx, "m-1")
	fmt.Println(st.State, st.Unit == u, st.Target == target, st.Cleaned, err)
	_, err = co.Status(ctx, "m-unknown")
	fmt.Println(errors.Is(err, migrate.ErrNotFound))
	// Output:
	// OwnedB true true false <nil>
	// true
}

// Unfinished lists what a restarted process should resume or cancel.
func ExampleCoordinator_Unfinished() {
	e := newExampleEnv()
	defer e.close()
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	for i, tenant := range []string{"course-72", "course-73"} {
		u, target := e.bucket(tenant)
		if _, err := co.Start(ctx, migrate.Spec{ID: fmt.Sprint("m-", i), Unit: u, Target: target}); err != nil {
			fmt.Println(err) // both courses in one bucket
		}
	}
	open, err := co.Unfinished(ctx)
	for _, st := range open {
		fmt.Println(st.ID, st.State)
	}
	fmt.Println(err)
	for _, st := range open {
		if _, err := co.Resume(ctx, st.ID); err != nil {
			panic(err)
		}
	}
	open, err = co.Unfinished(ctx)
	fmt.Println(len(open), err)
	// Output:
	// m-0 OwnedA
	// m-1 OwnedA
	// <nil>
	// 0 <nil>
}

// Cleanup deletes the source's closed copy once the grace period after the flip has passed
// (here the Coordinator's clock is moved past it).
func ExampleCoordinator_Cleanup() {
	e := newExampleEnv()
	defer e.close()
	e.write("course-72", 2)
	var skip atomic.Int64 // how far the example moved the clock
	co := e.coordinator(migrate.Options{
		Grace: time.Hour,
		Clock: func() time.Time { return time.Now().Add(time.Duration(skip.Load())) },
	})
	ctx := context.Background()

	u, target := e.bucket("course-72")
	if _, err := co.Migrate(ctx, migrate.Spec{ID: "m-1", Unit: u, Target: target}); err != nil {
		panic(err)
	}
	_, err := co.Cleanup(ctx, "m-1")
	fmt.Println(errors.Is(err, migrate.ErrGraceNotElapsed))
	skip.Store(int64(time.Hour + time.Minute))
	st, err := co.Cleanup(ctx, "m-1")
	fmt.Println(st.Cleaned, err)
	fmt.Println(e.get("course-72", "seat:1")) // the target serves the tenant
	// Output:
	// true
	// true <nil>
	// student-1
}

// Carve moves one tenant out of its shared bucket into an override unit on another shard;
// the bucket's other tenants never wait.
func ExampleCoordinator_Carve() {
	e := newExampleEnv()
	defer e.close()
	e.write("fat-merchant", 3)
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	_, target := e.bucket("fat-merchant")
	st, err := co.Carve(ctx, migrate.CarveSpec{Tenant: "fat-merchant", Target: target})
	fmt.Println(st.State, st.Unit, err)
	if _, err := e.router.Await(ctx, st.FlipGen); err != nil {
		panic(err)
	}
	rt, _ := e.router.Route("fat-merchant", "seat:0")
	fmt.Println(rt.Unit, rt.Shard.Name() == target, e.get("fat-merchant", "seat:2"))
	// Output:
	// OwnedB tenant "fat-merchant" <nil>
	// tenant "fat-merchant" true student-2
}

// StartCarve journals a carve-out; Resume drives it.
func ExampleCoordinator_StartCarve() {
	e := newExampleEnv()
	defer e.close()
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	bucket, target := e.bucket("fat-merchant")
	st, err := co.StartCarve(ctx, migrate.CarveSpec{ID: "carve-1", Tenant: "fat-merchant", Target: target})
	fmt.Println(st.State, st.Unit, st.From == bucket, err)
	st, err = co.Resume(ctx, "carve-1")
	fmt.Println(st.State, err)
	// Output:
	// OwnedA tenant "fat-merchant" true <nil>
	// OwnedB <nil>
}

// Fold returns a carved-out tenant into its hash bucket.
func ExampleCoordinator_Fold() {
	e := newExampleEnv()
	defer e.close()
	e.write("fat-merchant", 2)
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	bucket, target := e.bucket("fat-merchant")
	if _, err := co.Carve(ctx, migrate.CarveSpec{Tenant: "fat-merchant", Target: target}); err != nil {
		panic(err)
	}
	st, err := co.Fold(ctx, migrate.FoldSpec{Tenant: "fat-merchant"})
	fmt.Println(st.State, st.Into == bucket, err)
	if _, err := e.router.Await(ctx, st.FlipGen); err != nil {
		panic(err)
	}
	rt, _ := e.router.Route("fat-merchant", "seat:0")
	fmt.Println(rt.Unit == bucket, e.get("fat-merchant", "seat:1"))
	// Output:
	// OwnedB true <nil>
	// true student-1
}

// StartFold journals a fold-back; Resume drives it.
func ExampleCoordinator_StartFold() {
	e := newExampleEnv()
	defer e.close()
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	bucket, target := e.bucket("fat-merchant")
	if _, err := co.Carve(ctx, migrate.CarveSpec{Tenant: "fat-merchant", Target: target}); err != nil {
		panic(err)
	}
	st, err := co.StartFold(ctx, migrate.FoldSpec{ID: "fold-1", Tenant: "fat-merchant"})
	fmt.Println(st.State, st.Unit, st.Into == bucket, err)
	st, err = co.Resume(ctx, "fold-1")
	fmt.Println(st.State, err)
	// Output:
	// OwnedA tenant "fat-merchant" true <nil>
	// OwnedB <nil>
}

// Split spreads a carved-out tenant over both shards, then re-splits it to four
// sub-buckets; every record reads back from the sub-bucket of its key.
func ExampleCoordinator_Split() {
	e := newExampleEnv()
	defer e.close()
	e.write("fat-merchant", 4)
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	_, target := e.bucket("fat-merchant")
	if _, err := co.Carve(ctx, migrate.CarveSpec{Tenant: "fat-merchant", Target: target}); err != nil {
		panic(err)
	}
	st, err := co.Split(ctx, migrate.SplitSpec{Tenant: "fat-merchant", Targets: []string{"a", "b"}})
	fmt.Println(st.State, st.SplitTo, err)
	st, err = co.Split(ctx, migrate.SplitSpec{Tenant: "fat-merchant", Targets: []string{"b", "a", "a", "b"}})
	fmt.Println(st.State, st.SplitFrom, st.SplitTo, err)
	if _, err := e.router.Await(ctx, st.FlipGen); err != nil {
		panic(err)
	}
	rt, _ := e.router.Route("fat-merchant", "seat:3")
	fmt.Println(rt.Unit.Kind, e.get("fat-merchant", "seat:3"))
	// Output:
	// OwnedB [a b] <nil>
	// OwnedB [a b] [b a a b] <nil>
	// spread student-3
}

// StartSplit journals a split; Resume drives it. A tenant still in its shared bucket is
// carved out first.
func ExampleCoordinator_StartSplit() {
	e := newExampleEnv()
	defer e.close()
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()

	_, err := co.StartSplit(ctx, migrate.SplitSpec{Tenant: "fat-merchant", Targets: []string{"a", "b"}})
	fmt.Println(errors.Is(err, migrate.ErrInvalid))
	_, target := e.bucket("fat-merchant")
	if _, err := co.Carve(ctx, migrate.CarveSpec{Tenant: "fat-merchant", Target: target}); err != nil {
		panic(err)
	}
	st, err := co.StartSplit(ctx, migrate.SplitSpec{ID: "split-1", Tenant: "fat-merchant", Targets: []string{"a", "b"}})
	fmt.Println(st.State, st.Unit, st.Source == target, err)
	st, err = co.Resume(ctx, "split-1")
	fmt.Println(st.State, err)
	// Output:
	// true
	// OwnedA tenant "fat-merchant" true <nil>
	// OwnedB <nil>
}

// exampleStuckClaim leaves an import claim on the shard that does not own tenant's bucket,
// made by a migration "ghost" that has no journal record: what a control Redis that lost
// the journal leaves behind. It is planted here with the claim's two fields, the ownership
// record (importing) and the migration ID in it.
func exampleStuckClaim(e *exampleEnv, tenant string) (routing.Unit, string) {
	u, other := e.bucket(tenant)
	client := map[string]*redis.Client{"a": e.a, "b": e.b}[other]
	s, err := routing.NewShard(other, client, routing.ShardOptions{Prefix: e.prefix})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	claim := routing.Ownership{Generation: 2, State: routing.StateImporting}
	if _, err := s.Transition(ctx, u, routing.Ownership{}, claim); err != nil {
		panic(err)
	}
	if err := client.HSet(ctx, routingfmt.Keys(s.Keys().Tag(u)).Own, "mig", "ghost").Err(); err != nil {
		panic(err)
	}
	return u, other
}

// Claims shows a unit's import claims and whether a live migration still owns them.
func ExampleCoordinator_Claims() {
	e := newExampleEnv()
	defer e.close()
	co := e.coordinator(migrate.Options{})
	u, other := exampleStuckClaim(e, "course-72")

	ctx := context.Background()

	_, err := co.Start(ctx, migrate.Spec{Unit: u, Target: other})
	fmt.Println(errors.Is(err, migrate.ErrOwnershipChanged)) // the claim blocks the import
	claims, err := co.Claims(ctx, u)
	for _, c := range claims {
		fmt.Println(c.Shard == other, c.Own, c.Migration, c.Stuck())
	}
	fmt.Println(err)
	// Output:
	// true
	// true gen 2 importing ghost true
	// <nil>
}

// ClearClaim removes a stuck claim, so the unit can be imported there again.
func ExampleCoordinator_ClearClaim() {
	e := newExampleEnv()
	defer e.close()
	co := e.coordinator(migrate.Options{})
	ctx := context.Background()
	u, other := exampleStuckClaim(e, "course-72")

	c, err := co.ClearClaim(ctx, u, other)
	fmt.Println(c.Own, c.Migration, err)
	claims, _ := co.Claims(ctx, u)
	fmt.Println(len(claims))
	_, err = co.ClearClaim(ctx, u, other) // nothing left to clear
	fmt.Println(errors.Is(err, migrate.ErrInvalid))
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: other})
	fmt.Println(st.State, err)
	// Output:
	// gen 2 importing ghost <nil>
	// 0
	// true
	// OwnedB <nil>
}

// exampleCache returns a Cache over the env and fills tenant acme's keys on the shard that
// owns its bucket, with an hour to live; it returns that shard's client and the other shard.
func exampleCache(e *exampleEnv) (*migrate.Cache, *redis.Client, string) {
	mv, err := migrate.NewCache(e.control, migrate.CacheOptions{
		Shards: map[string]migrate.ShardClient{"a": e.a, "b": e.b},
		Prefix: e.prefix,
	})
	if err != nil {
		panic(err)
	}
	_, target := e.bucket("acme")
	source := map[string]*redis.Client{"a": e.b, "b": e.a}[target]
	ctx := context.Background()
	for _, k := range []string{"acme:home", "acme:menu"} {
		if err := source.Set(ctx, e.prefix+":"+k, "page "+k, time.Hour).Err(); err != nil {
			panic(err)
		}
	}
	return mv, source, target
}

// NewCache moves tenants of a pure cache: no ownership records, a warm target, and a
// rollback that is a flip back.
func ExampleNewCache() {
	e := newExampleEnv()
	defer e.close()
	mv, err := migrate.NewCache(e.control, migrate.CacheOptions{
		Shards: map[string]migrate.ShardClient{"a": e.a, "b": e.b},
		Prefix: e.prefix,
	})
	if err != nil {
		panic(err)
	}
	_, target := e.bucket("acme")
	st, err := mv.Move(context.Background(), migrate.CacheSpec{Tenant: "acme", Target: target})
	fmt.Println(st.State, st.Warmed, err)
	// Output:
	// Flipped 0 <nil>
}

// A pure cache's hot tenant moves with its hottest keys warmed first.
func ExampleCache_Move() {
	e := newExampleEnv()
	defer e.close()
	mv, _, target := exampleCache(e)
	ctx := context.Background()

	keys := []string{e.prefix + ":acme:home", e.prefix + ":acme:menu", e.prefix + ":acme:gone"}
	st, err := mv.Move(ctx, migrate.CacheSpec{Tenant: "acme", Target: target, Keys: keys})
	fmt.Println(st.State, "warmed", st.Warmed, "missing", st.Missing, "rollback safe", st.RollbackSafe, err)
	dst := map[string]*redis.Client{"a": e.a, "b": e.b}[target]
	fmt.Println(dst.Get(ctx, e.prefix+":acme:home").Val())
	// Output:
	// Flipped warmed 2 missing 1 rollback safe true <nil>
	// page acme:home
}

// Rollback flips the tenant back to its source while the old copy is still warm.
func ExampleCache_Rollback() {
	e := newExampleEnv()
	defer e.close()
	mv, _, target := exampleCache(e)
	ctx := context.Background()

	st, err := mv.Move(ctx, migrate.CacheSpec{Tenant: "acme", Target: target, Keys: []string{e.prefix + ":acme:home"}})
	if err != nil {
		panic(err)
	}
	if st.RollbackSafe {
		st, err = mv.Rollback(ctx, st.ID)
	}
	fmt.Println(st.State, st.BackGen > st.FlipGen, err)
	// Output:
	// RolledBack true <nil>
}

// Finish ends a flipped move: rollback is no longer offered, and the tenant may move again.
func ExampleCache_Finish() {
	e := newExampleEnv()
	defer e.close()
	mv, _, target := exampleCache(e)
	ctx := context.Background()

	st, err := mv.Move(ctx, migrate.CacheSpec{Tenant: "acme", Target: target, Keys: []string{e.prefix + ":acme:home"}})
	if err != nil {
		panic(err)
	}
	st, err = mv.Finish(ctx, st.ID)
	fmt.Println(st.State, err)
	_, err = mv.Rollback(ctx, st.ID)
	fmt.Println(err != nil)
	// Output:
	// Done <nil>
	// true
}

// Status reads a cache move's record; RollbackSafe is computed against the clock.
func ExampleCache_Status() {
	e := newExampleEnv()
	defer e.close()
	mv, _, target := exampleCache(e)
	ctx := context.Background()

	if _, err := mv.Move(ctx, migrate.CacheSpec{ID: "move-acme", Tenant: "acme", Target: target,
		Keys: []string{e.prefix + ":acme:home", e.prefix + ":acme:menu"}}); err != nil {
		panic(err)
	}
	st, err := mv.Status(ctx, "move-acme")
	fmt.Println(st.Tenant, st.State, st.Warmed, st.RollbackSafe, err)
	// Output:
	// acme Flipped 2 true <nil>
}

// Resume continues a move whose caller lost track of it (a crash, a lost reply); a move
// that already flipped is returned as it is.
func ExampleCache_Resume() {
	e := newExampleEnv()
	defer e.close()
	mv, _, target := exampleCache(e)
	ctx := context.Background()

	_, _ = mv.Move(ctx, migrate.CacheSpec{ID: "move-acme", Tenant: "acme", Target: target,
		Keys: []string{e.prefix + ":acme:home"}}) // its reply is lost
	st, err := mv.Resume(ctx, "move-acme")
	fmt.Println(st.State, st.Target == target, err)
	// Output:
	// Flipped true <nil>
}
