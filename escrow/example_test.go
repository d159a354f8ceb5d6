package escrow_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/escrow"
)

// ExampleCentral limits video jobs to 100 at once with one ledger.
func ExampleCentral() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	limit, err := escrow.NewCentral(rdb, escrow.CentralOptions{Name: "video-jobs", Capacity: 100})
	if err != nil {
		panic(err)
	}
	if err := limit.Init(ctx); err != nil {
		panic(err)
	}
	g, err := limit.Acquire(ctx, "job-42")
	if errors.Is(err, escrow.ErrExhausted) {
		return // try later
	}
	if err != nil {
		return // retry with the same job ID: it returns the same permit
	}
	// Pass g.Token to the video service; it rejects a permit shown with an older token.
	fmt.Println("permit", g.Permit, "token", g.Token)
	_ = limit.Release(ctx, "job-42")
}

// ExamplePool splits 100 permits between two regions, each granting locally, and moves
// ten idle permits from one to the other.
func ExamplePool() {
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"localhost:7000"}})
	pool, err := escrow.NewPool(rdb, escrow.PoolOptions{
		Name:     "video-jobs",
		Capacity: 100,
		Owners:   []escrow.Owner{{Name: "eu", First: 1, Last: 50}, {Name: "us", First: 51, Last: 100}},
	})
	if err != nil {
		panic(err)
	}
	if err := pool.Init(ctx); err != nil {
		panic(err)
	}
	if _, err := pool.Acquire(ctx, "eu", "job-42"); errors.Is(err, escrow.ErrFenced) {
		return // eu's ledger lost writes: an operator runs pool.Reconcile(ctx, "eu")
	}
	// A transfer ID names the move; repeating the call after any error is safe.
	if err := pool.Transfer(ctx, "us", "eu", 10, "move-2026-11-30-1"); err != nil {
		// Left pending: any process may finish it later.
		_, _ = pool.Recover(ctx)
	}
	rep, err := pool.Audit(ctx)
	if err == nil && !rep.Clean() {
		fmt.Println(rep)
	}
}
