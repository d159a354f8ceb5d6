package routing_test

import (
	"context"
	"errors"
	"fmt"
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

func ExampleNew() {
	control := redis.NewClient(&redis.Options{Addr: "control:6379"})
	r, err := routing.New(control, routing.Options{
		Shards: map[string]routing.Scripter{
			"a":       redis.NewClient(&redis.Options{Addr: "shard-a:6379"}),
			"b":       redis.NewClient(&redis.Options{Addr: "shard-b:6379"}),
			"cluster": redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"c1:6379", "c2:6379"}}),
		},
	})
	if err != nil {
		panic(err)
	}
	defer r.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// The operation ID identifies this intent across retries and redirects.
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

func ExampleStore_Publish() {
	ctx := context.Background()
	store, err := routing.NewStore(redis.NewClient(&redis.Options{Addr: "control:6379"}), routing.StoreOptions{})
	if err != nil {
		panic(err)
	}
	cur, err := store.Load(ctx)
	if err != nil {
		panic(err)
	}
	next := cur.Next() // generation + 1
	next.SetOverride("fat-merchant", "cluster")
	var conflict *routing.GenerationConflictError
	if err := store.Publish(ctx, next); errors.As(err, &conflict) {
		fmt.Println("someone else published generation", conflict.Current)
	}
}

// A migration closes the unit on the old owner with one script; the returned change-log ID
// is final, because the closed unit refuses every later write.
func ExampleShard_Transition() {
	ctx := context.Background()
	a, err := routing.NewShard("a", redis.NewClient(&redis.Options{Addr: "shard-a:6379"}), routing.ShardOptions{})
	if err != nil {
		panic(err)
	}
	u := routing.BucketUnit(4)
	last, err := a.Transition(ctx, u,
		routing.Ownership{Generation: 11, State: routing.StateOpen},
		routing.Ownership{Generation: 11, State: routing.StateClosed})
	if errors.Is(err, routing.ErrOwnershipChanged) {
		fmt.Println("ownership changed underneath; abort")
		return
	}
	fmt.Println("apply the change log up to", last, "on the new owner, then open it at generation 12")
}
