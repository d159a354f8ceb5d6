package replicas_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/replicas"
)

// A service reads a viral post through three copies on three masters; a miss reaches the
// database once for the whole fleet.
func Example() {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}})
	defer client.Close()
	r, err := replicas.New(client, replicas.Options{Copies: 3})
	if err != nil {
		panic(err)
	}
	defer r.Close()

	ctx := context.Background()
	if err := r.Promote(ctx, "post:ronaldo"); err != nil {
		fmt.Println("promotion:", err)
	}
	item, err := r.GetOrLoad(ctx, "post:ronaldo", time.Minute, func(ctx context.Context) (replicas.Item, error) {
		return replicas.Item{Value: []byte("goal!"), Version: 42}, nil // the database query
	})
	fmt.Println(string(item.Value), err)
}

// Writes carry the source's version; a late older write is refused.
func ExampleReplicator_Set() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	r, err := replicas.New(client, replicas.Options{})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	ctx := context.Background()
	_ = r.Set(ctx, "sku:1", []byte("price=10"), 5, time.Hour)
	err = r.Set(ctx, "sku:1", []byte("price=9"), 4, time.Hour)
	fmt.Println(err != nil)
}
