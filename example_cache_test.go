package celebrity_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity"
)

// Get loads a key once (from Redis, else from the loader) and serves it from the in-process
// cache until it is due for a refresh; a key the loader does not have is ErrNotFound.
func ExampleCache_Get() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rows := map[string]string{"post:1": "Hello"} // stands for the host's database
	posts, err := celebrity.New(rdb, func(_ context.Context, id string) (celebrity.Versioned[string], error) {
		title, ok := rows[id]
		if !ok {
			return celebrity.Versioned[string]{}, celebrity.ErrNotFound
		}
		return celebrity.Versioned[string]{Value: title, Version: 1}, nil
	}, celebrity.Options[string]{Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano())})
	if err != nil {
		panic(err)
	}
	defer posts.Close()

	ctx := context.Background()
	for range 3 {
		title, err := posts.Get(ctx, "post:1")
		fmt.Println(title, err)
	}
	_, err = posts.Get(ctx, "post:2")
	fmt.Println(errors.Is(err, celebrity.ErrNotFound))
	fmt.Println("source loads:", posts.Stats().SourceLoads)
	// Output:
	// Hello <nil>
	// Hello <nil>
	// Hello <nil>
	// true
	// source loads: 2
}

// Set is called after the database write, with the row's new version: it writes Redis (and
// the copies of a hot key), invalidates the fleet and this instance. An older version than
// Redis holds is refused.
func ExampleCache_Set() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rows := map[string]string{"post:1": "Hello"} // stands for the host's database
	posts, err := celebrity.New(rdb, func(_ context.Context, id string) (celebrity.Versioned[string], error) {
		title, ok := rows[id]
		if !ok {
			return celebrity.Versioned[string]{}, celebrity.ErrNotFound
		}
		return celebrity.Versioned[string]{Value: title, Version: 1}, nil
	}, celebrity.Options[string]{Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano())})
	if err != nil {
		panic(err)
	}
	defer posts.Close()
	key := "post:1"

	ctx := context.Background()
	title, _ := posts.Get(ctx, key)
	fmt.Println(title)
	rows[key] = "Hello, world" // the database write, at version 2
	if err := posts.Set(ctx, key, "Hello, world", 2); err != nil {
		panic(err)
	}
	title, _ = posts.Get(ctx, key)
	fmt.Println(title)
	err = posts.Set(ctx, key, "Hello", 1)
	fmt.Println(errors.Is(err, celebrity.ErrStaleVersion))
	// Output:
	// Hello
	// Hello, world
	// true
}

// Delete is called after the database delete, with the delete's version: every instance
// then reads ErrNotFound.
func ExampleCache_Delete() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rows := map[string]string{"post:1": "Hello"} // stands for the host's database
	posts, err := celebrity.New(rdb, func(_ context.Context, id string) (celebrity.Versioned[string], error) {
		title, ok := rows[id]
		if !ok {
			return celebrity.Versioned[string]{}, celebrity.ErrNotFound
		}
		return celebrity.Versioned[string]{Value: title, Version: 1}, nil
	}, celebrity.Options[string]{Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano())})
	if err != nil {
		panic(err)
	}
	defer posts.Close()
	key := "post:1"

	ctx := context.Background()
	title, _ := posts.Get(ctx, key)
	fmt.Println(title)
	delete(rows, key) // the database delete, at version 2
	if err := posts.Delete(ctx, key, 2); err != nil {
		panic(err)
	}
	_, err = posts.Get(ctx, key)
	fmt.Println(errors.Is(err, celebrity.ErrNotFound))
	// Output:
	// Hello
	// true
}

// Promote adds a key the host knows will be hot (a launch) to the fleet's hot set before the
// traffic comes; Demote takes it out. Both are idempotent.
func ExampleCache_Promote() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	prefix := fmt.Sprintf("example:%d:", time.Now().UnixNano())
	posts, err := celebrity.New(rdb, func(_ context.Context, id string) (celebrity.Versioned[string], error) {
		return celebrity.Versioned[string]{}, celebrity.ErrNotFound // the launch's post is not written yet
	}, celebrity.Options[string]{Prefix: prefix})
	if err != nil {
		panic(err)
	}
	defer posts.Close()
	key := "post:launch"

	ctx := context.Background()
	if err := posts.Promote(ctx, key); err != nil {
		panic(err)
	}
	fmt.Println(posts.Hot())
	hs, err := celebrity.ReadHotSet(ctx, rdb, prefix) // what an operator's tool sees
	if err != nil {
		panic(err)
	}
	fmt.Println(hs.Version, len(hs.Members), hs.Members[0].Manual)
	if err := posts.Demote(ctx, key); err != nil {
		panic(err)
	}
	fmt.Println(len(posts.Hot()))
	// Output:
	// [post:launch]
	// 1 1 true
	// 0
}
