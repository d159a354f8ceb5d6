package replicas_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/replicas"
)

// exampleReplicator returns a Replicator over the examples' cluster, under a prefix of its
// own so that every run starts with no keys, and a func that closes it and its client.
func exampleReplicator(opts replicas.Options) (*replicas.Replicator, func()) {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("REDIS_CLUSTER_ADDRS"), ",")})
	opts.Prefix = fmt.Sprintf("example:%d:", time.Now().UnixNano())
	r, err := replicas.New(client, opts)
	if err != nil {
		panic(err)
	}
	return r, func() { _ = r.Close(); _ = client.Close() }
}

// A service reads a viral post through three copies on three masters; a miss reaches the
// database once for the whole fleet.
func Example() {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("REDIS_CLUSTER_ADDRS"), ",")})
	defer client.Close()
	r, err := replicas.New(client, replicas.Options{
		Copies: 3,
		Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano()), // fresh keys per run
	})
	if err != nil {
		panic(err)
	}
	defer r.Close()

	ctx := context.Background()
	if err := r.Promote(ctx, "post:ronaldo"); err != nil {
		fmt.Println("promotion:", err)
	}
	loads := 0
	for range 3 {
		item, err := r.GetOrLoad(ctx, "post:ronaldo", time.Minute, func(ctx context.Context, _ string) (replicas.Item, error) {
			loads++ // the database query
			return replicas.Item{Value: []byte("goal!"), Version: 42}, nil
		})
		fmt.Println(string(item.Value), item.Version, err)
	}
	fmt.Println("database loads:", loads)
	// Output:
	// goal! 42 <nil>
	// goal! 42 <nil>
	// goal! 42 <nil>
	// database loads: 1
}

// New takes the host's client (standalone or cluster) and does no I/O without a FleetKey;
// the zero Options are valid, and a bad field is refused with ErrInvalid.
func ExampleNew() {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("REDIS_CLUSTER_ADDRS"), ",")})
	defer client.Close()
	r, err := replicas.New(client, replicas.Options{
		Copies: 3,
		Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano()),
		Hot:    []string{"post:launch"},
	})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	fmt.Println(r.IsHot("post:launch"), r.IsHot("post:1"))

	_, err = replicas.New(client, replicas.Options{Copies: replicas.MaxCopies + 1})
	fmt.Println(errors.Is(err, replicas.ErrInvalid))
	// Output:
	// true false
	// true
}

// Get reads one copy of a hot key, or the logical key; a key nobody wrote is ErrNotFound.
func ExampleReplicator_Get() {
	r, done := exampleReplicator(replicas.Options{})
	defer done()
	ctx := context.Background()

	_, err := r.Get(ctx, "sku:1")
	fmt.Println(errors.Is(err, replicas.ErrNotFound))
	if err := r.Set(ctx, "sku:1", []byte("price=10"), 5, time.Hour); err != nil {
		panic(err)
	}
	item, err := r.Get(ctx, "sku:1")
	fmt.Println(string(item.Value), item.Version, err)
	// Output:
	// true
	// price=10 5 <nil>
}

// GetOrLoad runs the loader once for a miss and serves the stored value afterwards; a key
// the source does not have is answered ErrNotFound for NegativeTTL without loading again.
func ExampleReplicator_GetOrLoad() {
	r, done := exampleReplicator(replicas.Options{})
	defer done()
	ctx := context.Background()

	loads := 0
	load := func(key string) replicas.Loader {
		return func(ctx context.Context, _ string) (replicas.Item, error) {
			loads++
			if key != "user:1" {
				return replicas.Item{}, replicas.ErrNotFound
			}
			return replicas.Item{Value: []byte("Ada"), Version: 1}, nil
		}
	}
	for range 2 {
		item, err := r.GetOrLoad(ctx, "user:1", time.Minute, load("user:1"))
		fmt.Println(string(item.Value), err)
	}
	for range 2 {
		_, err := r.GetOrLoad(ctx, "user:2", time.Minute, load("user:2"))
		fmt.Println(errors.Is(err, replicas.ErrNotFound))
	}
	fmt.Println("loads:", loads)
	// Output:
	// Ada <nil>
	// Ada <nil>
	// true
	// true
	// loads: 2
}

// Writes carry the source's version; a late older write is refused.
func ExampleReplicator_Set() {
	r, done := exampleReplicator(replicas.Options{})
	defer done()
	ctx := context.Background()

	fmt.Println(r.Set(ctx, "sku:1", []byte("price=10"), 5, time.Hour))
	err := r.Set(ctx, "sku:1", []byte("price=9"), 4, time.Hour)
	fmt.Println(errors.Is(err, replicas.ErrStaleVersion))
	item, _ := r.Get(ctx, "sku:1")
	fmt.Println(string(item.Value), item.Version)
	// Output:
	// <nil>
	// true
	// price=10 5
}

// Delete writes a versioned tombstone: the key reads as missing, and a late write of an
// older version cannot bring the value back.
func ExampleReplicator_Delete() {
	r, done := exampleReplicator(replicas.Options{})
	defer done()
	ctx := context.Background()

	if err := r.Set(ctx, "sku:1", []byte("price=10"), 1, time.Hour); err != nil {
		panic(err)
	}
	fmt.Println(r.Delete(ctx, "sku:1", 2))
	_, err := r.Get(ctx, "sku:1")
	fmt.Println(errors.Is(err, replicas.ErrNotFound))
	err = r.Set(ctx, "sku:1", []byte("price=10"), 1, time.Hour) // a late, older write
	fmt.Println(errors.Is(err, replicas.ErrStaleVersion))
	// Output:
	// <nil>
	// true
	// true
}

// Promote warms the copies from the logical key before reads use them: the promoted key's
// reads then go to its copies, with no miss and no source load.
func ExampleReplicator_Promote() {
	r, done := exampleReplicator(replicas.Options{Copies: 3})
	defer done()
	ctx := context.Background()

	if err := r.Set(ctx, "post:launch", []byte("hello"), 1, time.Hour); err != nil {
		panic(err)
	}
	fmt.Println(r.Promote(ctx, "post:launch"), r.IsHot("post:launch"))
	for range 4 {
		item, err := r.Get(ctx, "post:launch")
		fmt.Println(string(item.Value), err)
	}
	st := r.Stats()
	var copyReads uint64
	for _, n := range st.CopyReads {
		copyReads += n
	}
	fmt.Println("copy reads:", copyReads, "primary reads:", st.PrimaryReads, "misses:", st.Misses)
	// Output:
	// <nil> true
	// hello <nil>
	// hello <nil>
	// hello <nil>
	// hello <nil>
	// copy reads: 4 primary reads: 0 misses: 0
}

// Demote sends the key's reads back to the logical key; it does no I/O, and the copies
// expire with their TTL.
func ExampleReplicator_Demote() {
	r, done := exampleReplicator(replicas.Options{})
	defer done()
	ctx := context.Background()

	if err := r.Set(ctx, "post:launch", []byte("hello"), 1, time.Hour); err != nil {
		panic(err)
	}
	_ = r.Promote(ctx, "post:launch")
	fmt.Println(r.Demote(ctx, "post:launch"), r.IsHot("post:launch"))
	item, err := r.Get(ctx, "post:launch")
	fmt.Println(string(item.Value), err, "primary reads:", r.Stats().PrimaryReads)
	// Output:
	// <nil> false
	// hello <nil> primary reads: 1
}

// Refresh reloads the cluster's slot map at once, for example after a resharding the host
// started, instead of waiting for the next periodic reload.
func ExampleReplicator_Refresh() {
	r, done := exampleReplicator(replicas.Options{Copies: 3})
	defer done()
	ctx := context.Background()

	fmt.Println(r.Refresh(ctx))
	if err := r.Set(ctx, "post:1", []byte("hello"), 1, time.Hour); err != nil {
		panic(err)
	}
	item, err := r.Get(ctx, "post:1")
	fmt.Println(string(item.Value), err)
	// Output:
	// <nil>
	// hello <nil>
}
