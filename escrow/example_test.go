package escrow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/escrow"
)

// The examples run against two servers, REDIS_ADDR for the ledgers and REDIS_WITNESS_ADDR for
// the witnesses (the package's TestMain starts both with appendfsync always). Each example
// uses keys of its own.

// exampleClients returns a client of the ledgers' server and one of the witnesses' server.
func exampleClients() (ledgers, witnesses *redis.Client) {
	return redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")}), redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_WITNESS_ADDR")})
}

// examplePrefix returns a key prefix no earlier run used.
func examplePrefix() string { return fmt.Sprintf("example:%d:", time.Now().UnixNano()) }

// examplePool returns an initialised pool "video" of 10 permits: eu holds 1..5, us 6..10.
func examplePool(ctx context.Context, rdb, wit *redis.Client, prefix string) *escrow.Pool {
	pool, err := escrow.NewPool(rdb, escrow.PoolOptions{
		Name:     "video",
		Capacity: 10,
		Owners:   []escrow.Owner{{Name: "eu", First: 1, Last: 5}, {Name: "us", First: 6, Last: 10}},
		Witness:  wit,
		Prefix:   prefix,
	})
	if err != nil {
		panic(err)
	}
	if err := pool.Init(ctx); err != nil {
		panic(err)
	}
	return pool
}

// exampleCentral returns an initialised Central "video" of capacity permits.
func exampleCentral(ctx context.Context, rdb, wit *redis.Client, prefix string, capacity int) *escrow.Central {
	limit, err := escrow.NewCentral(rdb, escrow.CentralOptions{Name: "video", Capacity: capacity, Witness: wit, Prefix: prefix})
	if err != nil {
		panic(err)
	}
	if err := limit.Init(ctx); err != nil {
		panic(err)
	}
	return limit
}

// free returns the free permits of each owner, from an audit.
func free(ctx context.Context, pool *escrow.Pool) map[string]int {
	rep, err := pool.Audit(ctx)
	if err != nil {
		panic(err)
	}
	out := map[string]int{}
	for _, o := range rep.Owners {
		out[o.Owner] = o.Free
	}
	return out
}

// ExampleNewCentral limits video jobs to 100 at once with one ledger. The token goes with
// the job to the video service, which refuses a permit shown with an older token.
func ExampleNewCentral() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	limit, err := escrow.NewCentral(rdb, escrow.CentralOptions{
		Name:     "video-jobs",
		Capacity: 100,
		Witness:  wit, // records that the ledger exists, on another server
		Prefix:   examplePrefix(),
	})
	if err != nil {
		panic(err)
	}
	if err := limit.Init(ctx); err != nil {
		panic(err)
	}
	g, err := limit.Acquire(ctx, "job-42")
	if err != nil {
		panic(err) // ErrExhausted: try later; any other error: retry with the same job ID
	}
	fmt.Println("permit", g.Permit, "token", g.Token)
	fmt.Println(limit.Release(ctx, "job-42"))
	// Output:
	// permit 1 token 2
	// <nil>
}

// ExampleCentral_Init creates the ledger once; every process may call it, and a process
// configured with another capacity is told so instead of silently using the ledger.
func ExampleCentral_Init() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	prefix := examplePrefix()
	opts := escrow.CentralOptions{Name: "video", Capacity: 3, Witness: wit, Prefix: prefix}
	limit, err := escrow.NewCentral(rdb, opts)
	if err != nil {
		panic(err)
	}
	fmt.Println(limit.Init(ctx), limit.Init(ctx))

	opts.Capacity = 4 // another process, configured differently
	other, err := escrow.NewCentral(rdb, opts)
	if err != nil {
		panic(err)
	}
	fmt.Println(errors.Is(other.Init(ctx), escrow.ErrLayoutMismatch))
	// Output:
	// <nil> <nil>
	// true
}

// ExampleCentral_Acquire shows that an acquire is idempotent per job ID and that a full
// limiter says so.
func ExampleCentral_Acquire() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	limit := exampleCentral(ctx, rdb, wit, examplePrefix(), 1)

	g, _ := limit.Acquire(ctx, "job-1")
	again, _ := limit.Acquire(ctx, "job-1") // a retry, say after a lost reply
	fmt.Println(g.Permit, again.Permit, again.Token == g.Token, again.Replayed)
	_, err := limit.Acquire(ctx, "job-2")
	fmt.Println(errors.Is(err, escrow.ErrExhausted))
	// Output:
	// 1 1 true true
	// true
}

// ExampleCentral_Release shows that a repeated release frees nothing.
func ExampleCentral_Release() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	limit := exampleCentral(ctx, rdb, wit, examplePrefix(), 2)

	if _, err := limit.Acquire(ctx, "job-1"); err != nil {
		panic(err)
	}
	fmt.Println(limit.Release(ctx, "job-1"))
	fmt.Println(limit.Release(ctx, "job-1"), "(a replay: released already)")
	fmt.Println(errors.Is(limit.Release(ctx, "job-2"), escrow.ErrNotHeld), "(never held)")
	// Output:
	// <nil>
	// <nil> (a replay: released already)
	// true (never held)
}

// ExampleCentral_Renew gives grants a lease: a holder that stops renewing loses its permit.
func ExampleCentral_Renew() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	limit, err := escrow.NewCentral(rdb, escrow.CentralOptions{Name: "video", Capacity: 2, Witness: wit,
		Prefix: examplePrefix(), Lease: time.Minute})
	if err != nil {
		panic(err)
	}
	if err := limit.Init(ctx); err != nil {
		panic(err)
	}
	g, _ := limit.Acquire(ctx, "job-1")
	exp, err := limit.Renew(ctx, "job-1")
	fmt.Println(err, !exp.Before(g.Expires))
	_, err = limit.Renew(ctx, "job-2")
	fmt.Println(errors.Is(err, escrow.ErrNotHeld))
	// Output:
	// <nil> true
	// true
}

// ExampleCentral_Holders lists who holds what.
func ExampleCentral_Holders() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	limit := exampleCentral(ctx, rdb, wit, examplePrefix(), 3)
	for _, job := range []string{"job-a", "job-b"} {
		if _, err := limit.Acquire(ctx, job); err != nil {
			panic(err)
		}
	}
	hs, _ := limit.Holders(ctx)
	for _, h := range hs {
		fmt.Println(h.Permit, h.Job, h.Token)
	}
	// Output:
	// 1 job-a 2
	// 2 job-b 3
}

// ExampleCentral_Audit places every permit.
func ExampleCentral_Audit() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	limit := exampleCentral(ctx, rdb, wit, examplePrefix(), 3)
	if _, err := limit.Acquire(ctx, "job-a"); err != nil {
		panic(err)
	}
	rep, _ := limit.Audit(ctx)
	fmt.Println(rep.Clean(), rep)
	// Output:
	// true capacity=3 free=2 held=1 in-transfer=0 pending=0
}

// ExampleCentral_Stats counts what the limiter did in this process.
func ExampleCentral_Stats() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	limit := exampleCentral(ctx, rdb, wit, examplePrefix(), 1)
	_, _ = limit.Acquire(ctx, "job-a")
	_, _ = limit.Acquire(ctx, "job-a")
	_, _ = limit.Acquire(ctx, "job-b")
	_ = limit.Release(ctx, "job-a")
	st := limit.Stats()
	fmt.Println(st.Acquired, st.Replayed, st.Exhausted, st.Released)
	// Output:
	// 1 1 1 1
}

// ExampleCentral_RestoreLost brings back a ledger that was lost (here deleted; in real life
// a FLUSHALL or a wrong restore). Init refuses to re-create it with every permit free while
// its old holders may still run; an operator who knows they are gone calls RestoreLost. The
// new tokens are above every old one.
func ExampleCentral_RestoreLost() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	prefix := examplePrefix()
	limit := exampleCentral(ctx, rdb, wit, prefix, 2)
	old, _ := limit.Acquire(ctx, "job-1")

	keys, _ := rdb.Keys(ctx, prefix+"*").Result()
	rdb.Del(ctx, keys...) // the ledger is lost

	fmt.Println(errors.Is(limit.Init(ctx), escrow.ErrLedgerMissing))
	fmt.Println(limit.RestoreLost(ctx))
	g, _ := limit.Acquire(ctx, "job-2")
	fmt.Println(g.Token > old.Token)
	// Output:
	// true
	// <nil>
	// true
}

// ExampleNewPool splits 10 permits between two regions, each granting its own, with the
// witnesses on another server than the ledgers.
func ExampleNewPool() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool, err := escrow.NewPool(rdb, escrow.PoolOptions{
		Name:     "video",
		Capacity: 10,
		Owners:   []escrow.Owner{{Name: "eu", First: 1, Last: 5}, {Name: "us", First: 6, Last: 10}},
		Witness:  wit, // a Redis Cluster client may leave it nil: witnesses go to other masters
		Prefix:   examplePrefix(),
	})
	if err != nil {
		panic(err)
	}
	if err := pool.Init(ctx); err != nil {
		panic(err)
	}
	g, err := pool.Acquire(ctx, "us", "job-42")
	if err != nil {
		panic(err)
	}
	fmt.Println(g.Owner, "permit", g.Permit, "token", g.Token)
	fmt.Println(pool.Owners())
	// Output:
	// us permit 6 token 2
	// [eu us]
}

// ExamplePool_Init shows the refusal of a witness that shares its ledgers' server: a restore
// of that server would roll both back together, and fencing could not see it.
func ExamplePool_Init() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool, err := escrow.NewPool(rdb, escrow.PoolOptions{Name: "video", Capacity: 2,
		Owners: []escrow.Owner{{Name: "eu", First: 1, Last: 2}}, Prefix: examplePrefix()})
	if err != nil {
		panic(err)
	}
	fmt.Println(errors.Is(pool.Init(ctx), escrow.ErrSharedWitness))
	// Output:
	// true
}

// ExamplePool_Acquire grants at one owner; the others' free permits do not help it.
func ExamplePool_Acquire() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	for i := range 6 {
		g, err := pool.Acquire(ctx, "eu", fmt.Sprint("job-", i))
		fmt.Println(g.Permit, err)
	}
	// Output:
	// 1 <nil>
	// 2 <nil>
	// 3 <nil>
	// 4 <nil>
	// 5 <nil>
	// 0 escrow: no free permit (owner "eu", job "job-5")
}

// ExamplePool_Release frees a permit once.
func ExamplePool_Release() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	if _, err := pool.Acquire(ctx, "eu", "job-1"); err != nil {
		panic(err)
	}
	fmt.Println(errors.Is(pool.Release(ctx, "us", "job-1"), escrow.ErrNotHeld), "(granted by eu)")
	fmt.Println(pool.Release(ctx, "eu", "job-1"))
	fmt.Println(pool.Release(ctx, "eu", "job-1"), "(a replay: released already)")
	// Output:
	// true (granted by eu)
	// <nil>
	// <nil> (a replay: released already)
}

// ExamplePool_Renew extends a lease; the renewal is acknowledged only once the witness has
// confirmed it.
func ExamplePool_Renew() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool, err := escrow.NewPool(rdb, escrow.PoolOptions{Name: "video", Capacity: 2,
		Owners: []escrow.Owner{{Name: "eu", First: 1, Last: 2}}, Witness: wit, Prefix: examplePrefix(), Lease: time.Minute})
	if err != nil {
		panic(err)
	}
	if err := pool.Init(ctx); err != nil {
		panic(err)
	}
	g, _ := pool.Acquire(ctx, "eu", "job-1")
	exp, err := pool.Renew(ctx, "eu", "job-1")
	fmt.Println(err, !exp.Before(g.Expires))
	// Output:
	// <nil> true
}

// ExamplePool_Holders lists the jobs holding eu's permits.
func ExamplePool_Holders() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	_, _ = pool.Acquire(ctx, "eu", "job-a")
	_, _ = pool.Acquire(ctx, "us", "job-b")
	hs, _ := pool.Holders(ctx, "eu")
	fmt.Println(len(hs), hs[0].Job, hs[0].Permit)
	// Output:
	// 1 job-a 1
}

// ExamplePool_Transfer moves two idle permits from us to eu. The transfer ID names the move:
// repeating the call after any error is safe.
func ExamplePool_Transfer() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	fmt.Println(pool.Transfer(ctx, "us", "eu", 2, "move-1"))
	fmt.Println(pool.Transfer(ctx, "us", "eu", 2, "move-1")) // a repeat moves nothing more
	fmt.Println(free(ctx, pool))
	// Output:
	// <nil>
	// <nil>
	// map[eu:7 us:3]
}

// ExamplePool_Freeze runs a transfer step by step: Freeze at the source, Deliver to the
// target, Complete at the source.
func ExamplePool_Freeze() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	f, err := pool.Freeze(ctx, "us", "eu", 2, "move-1")
	fmt.Println(f.Permits, f.State, err)
	fmt.Println(free(ctx, pool)) // frozen permits are at neither owner
	fmt.Println(pool.Deliver(ctx, f))
	fmt.Println(pool.Complete(ctx, "us", "move-1"))
	fmt.Println(free(ctx, pool))
	// Output:
	// [6 7] frozen <nil>
	// map[eu:5 us:3]
	// <nil>
	// <nil>
	// map[eu:7 us:3]
}

// ExamplePool_Deliver shows that a delivery is idempotent: a second one adds nothing.
func ExamplePool_Deliver() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	f, _ := pool.Freeze(ctx, "us", "eu", 1, "move-1")
	fmt.Println(pool.Deliver(ctx, f), pool.Deliver(ctx, f))
	fmt.Println(free(ctx, pool)["eu"])
	// Output:
	// <nil> <nil>
	// 6
}

// ExamplePool_Complete shows that a transfer the target has refused cannot be completed.
func ExamplePool_Complete() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	if _, err := pool.Freeze(ctx, "us", "eu", 1, "move-1"); err != nil {
		panic(err)
	}
	fmt.Println(pool.Cancel(ctx, "us", "move-1"))
	fmt.Println(errors.Is(pool.Complete(ctx, "us", "move-1"), escrow.ErrAborted))
	// Output:
	// <nil>
	// true
}

// ExamplePool_Cancel aborts a pending transfer: the target durably refuses it first, so a
// late delivery of it fails, and the permits go back to the source.
func ExamplePool_Cancel() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	f, _ := pool.Freeze(ctx, "us", "eu", 2, "move-1")
	fmt.Println(pool.Cancel(ctx, "us", "move-1"))
	fmt.Println(errors.Is(pool.Deliver(ctx, f), escrow.ErrRefused))
	fmt.Println(free(ctx, pool))
	// Output:
	// <nil>
	// true
	// map[eu:5 us:5]
}

// ExamplePool_Recover finishes a transfer whose process died after the freeze.
func ExamplePool_Recover() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	if _, err := pool.Freeze(ctx, "us", "eu", 2, "move-1"); err != nil {
		panic(err)
	}
	rep, err := pool.Recover(ctx)
	fmt.Println(rep.Completed, len(rep.Pending), err)
	fmt.Println(free(ctx, pool))
	// Output:
	// [move-1] 0 <nil>
	// map[eu:7 us:3]
}

// ExamplePool_Reconcile repairs a ledger restored from an old copy. The restored ledger
// forgot an acknowledged grant; the witness shows that it is behind, so it is fenced instead
// of granting from its old state. After Reconcile its tokens are above every witnessed one,
// so a downstream that checks tokens refuses the forgotten holder.
func ExamplePool_Reconcile() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	prefix := examplePrefix()
	pool := examplePool(ctx, rdb, wit, prefix)

	keys, _ := rdb.Keys(ctx, prefix+"{video:eu}:*").Result()
	backup := map[string]string{}
	for _, k := range keys {
		backup[k] = rdb.Dump(ctx, k).Val()
	}
	old, _ := pool.Acquire(ctx, "eu", "job-1")
	for k, v := range backup { // the server is restored from the old copy
		rdb.RestoreReplace(ctx, k, 0, v)
	}

	_, err := pool.Acquire(ctx, "eu", "job-2")
	var fe *escrow.FencedError
	fmt.Println(errors.As(err, &fe), fe.Owner)
	fmt.Println(pool.Reconcile(ctx, "eu"))
	g, _ := pool.Acquire(ctx, "eu", "job-2")
	fmt.Println(g.Permit, g.Token > old.Token)
	// Output:
	// true eu
	// <nil>
	// 1 true
}

// ExamplePool_RestoreLost puts back the permits of a lost ledger, once the operator knows
// that none of their holders still runs.
func ExamplePool_RestoreLost() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	prefix := examplePrefix()
	pool := examplePool(ctx, rdb, wit, prefix)

	keys, _ := rdb.Keys(ctx, prefix+"{video:eu}:*").Result()
	rdb.Del(ctx, keys...) // eu's ledger is lost

	_, err := pool.Acquire(ctx, "eu", "job-1")
	fmt.Println(errors.Is(err, escrow.ErrLedgerMissing))
	fmt.Println(pool.Reconcile(ctx, "eu")) // back, without the permits it lost
	rep, _ := pool.Audit(ctx)
	fmt.Println(rep.Missing)
	fmt.Println(pool.RestoreLost(ctx, "eu", "restore-1"))
	// Output:
	// true
	// <nil>
	// [1 2 3 4 5]
	// [1 2 3 4 5] <nil>
}

// ExamplePool_Audit places every permit of the pool.
func ExamplePool_Audit() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	_, _ = pool.Acquire(ctx, "eu", "job-1")
	_, _ = pool.Freeze(ctx, "us", "eu", 2, "move-1")
	rep, _ := pool.Audit(ctx)
	fmt.Println(rep)
	fmt.Println(rep.Clean(), rep.Pending[0].ID, rep.Pending[0].Permits)
	// Output:
	// capacity=10 free=7 held=1 in-transfer=2 pending=1
	// true move-1 [6 7]
}

// ExamplePool_Stats counts what the pool did in this process.
func ExamplePool_Stats() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	_, _ = pool.Acquire(ctx, "eu", "job-1")
	_ = pool.Transfer(ctx, "us", "eu", 1, "move-1")
	st := pool.Stats()
	fmt.Println(st.Acquired, st.Frozen, st.Accepted, st.Completed)
	// Output:
	// 1 1 1 1
}

// ExamplePool_WitnessKey names the key of an owner's witness chain, on the witness client.
func ExamplePool_WitnessKey() {
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool, err := escrow.NewPool(rdb, escrow.PoolOptions{Name: "video", Capacity: 2,
		Owners: []escrow.Owner{{Name: "eu", First: 1, Last: 2}}, Witness: wit})
	if err != nil {
		panic(err)
	}
	fmt.Println(pool.WitnessKey("eu"))
	// Output:
	// celebrity:escrow:{21063}:witness:video:eu
}

// ExampleNewRebalancer moves idle permits to the owner that ran out, one pass at a time.
func ExampleNewRebalancer() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	for i := range 5 {
		_, _ = pool.Acquire(ctx, "eu", fmt.Sprint("job-", i)) // eu runs out
	}
	rb, err := escrow.NewRebalancer(pool, escrow.RebalanceOptions{Batch: 2})
	if err != nil {
		panic(err)
	}
	moved, err := rb.Step(ctx)
	fmt.Println(moved, err)
	fmt.Println(free(ctx, pool))
	// Output:
	// 2 <nil>
	// map[eu:2 us:3]
}

// ExampleRebalancer_Run runs passes until its context ends.
func ExampleRebalancer_Run() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	for i := range 5 {
		_, _ = pool.Acquire(ctx, "eu", fmt.Sprint("job-", i))
	}
	rb, err := escrow.NewRebalancer(pool, escrow.RebalanceOptions{Batch: 2, Interval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- rb.Run(runCtx) }()
	// Wait (bounded) for the rebalancer to move a permit to "eu".
	for deadline := time.Now().Add(30 * time.Second); free(ctx, pool)["eu"] == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			panic("the rebalancer moved no permit to eu within 30 s")
		}
	}
	stop()
	fmt.Println(<-done)
	fmt.Println(free(ctx, pool))
	// Output:
	// context canceled
	// map[eu:2 us:3]
}

// ExampleRebalancer_Step runs one pass: it moves a batch from the idlest owner to the
// busiest, and nothing once no owner has run out.
func ExampleRebalancer_Step() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	pool := examplePool(ctx, rdb, wit, examplePrefix())
	for i := range 5 {
		_, _ = pool.Acquire(ctx, "eu", fmt.Sprint("job-", i)) // eu runs out
	}
	rb, err := escrow.NewRebalancer(pool, escrow.RebalanceOptions{Batch: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println(rb.Step(ctx))
	fmt.Println(free(ctx, pool))
	fmt.Println(rb.Step(ctx)) // eu has a free permit now
	// Output:
	// 1 <nil>
	// map[eu:1 us:4]
	// 0 <nil>
}

// ExampleAuditReport_Clean checks a fresh pool.
func ExampleAuditReport_Clean() {
	ctx := context.Background()
	rdb, wit := exampleClients()
	defer rdb.Close()
	defer wit.Close()
	rep, _ := examplePool(ctx, rdb, wit, examplePrefix()).Audit(ctx)
	fmt.Println(rep.Clean(), rep.String())
	// Output:
	// true capacity=10 free=10 held=0 in-transfer=0 pending=0
}

// ExampleFencedError shows the data a fenced ledger's error carries.
func ExampleFencedError() {
	err := error(&escrow.FencedError{Owner: "eu", LedgerSeq: 3, WitnessSeq: 7})
	fmt.Println(errors.Is(err, escrow.ErrFenced))
	fmt.Println(err)
	// Output:
	// true
	// escrow: ledger of owner "eu" is fenced (ledger seq 3, witness seq 7)
}
