package celebrity_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity"
)

// examplePosts is a Cache of post titles over the examples' server, its loader reading a map
// that stands for the host's database; every run has keys of its own.
func examplePosts(rows map[string]string) (*celebrity.Cache[string], string, func()) {
	rdb := redis.NewClient(&redis.Options{Addr: celebrity.ExampleAddr})
	run := fmt.Sprintf("example:%d:", time.Now().UnixNano())
	posts, err := celebrity.New(rdb, func(_ context.Context, id string) (string, uint64, error) {
		title, ok := rows[id]
		if !ok {
			return "", 0, celebrity.ErrNotFound
		}
		return title, 1, nil
	}, celebrity.Options[string]{Prefix: run + "cache:", ReportInterval: -1})
	if err != nil {
		panic(err)
	}
	return posts, run, func() { _ = posts.Close(); _ = rdb.Close() }
}

// Get loads a key once (from Redis, else from the loader) and serves it from the in-process
// cache until it is due for a refresh; a key the loader does not have is ErrNotFound.
func ExampleCache_Get() {
	rows := map[string]string{}
	posts, run, done := examplePosts(rows)
	defer done()
	rows[run+"post:1"] = "Hello"

	ctx := context.Background()
	for range 3 {
		title, err := posts.Get(ctx, run+"post:1")
		fmt.Println(title, err)
	}
	_, err := posts.Get(ctx, run+"post:2")
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
	rows := map[string]string{}
	posts, run, done := examplePosts(rows)
	defer done()
	key := run + "post:1"
	rows[key] = "Hello"

	ctx := context.Background()
	title, _ := posts.Get(ctx, key)
	fmt.Println(title)
	rows[key] = "Hello, world" // the database write, at version 2
	if err := posts.Set(ctx, key, "Hello, world", 2); err != nil {
		panic(err)
	}
	title, _ = posts.Get(ctx, key)
	fmt.Println(title)
	err := posts.Set(ctx, key, "Hello", 1)
	fmt.Println(errors.Is(err, celebrity.ErrStaleVersion))
	// Output:
	// Hello
	// Hello, world
	// true
}

// Delete is called after the database delete, with the delete's version: every instance
// then reads ErrNotFound.
func ExampleCache_Delete() {
	rows := map[string]string{}
	posts, run, done := examplePosts(rows)
	defer done()
	key := run + "post:1"
	rows[key] = "Hello"

	ctx := context.Background()
	title, _ := posts.Get(ctx, key)
	fmt.Println(title)
	delete(rows, key) // the database delete, at version 2
	if err := posts.Delete(ctx, key, 2); err != nil {
		panic(err)
	}
	_, err := posts.Get(ctx, key)
	fmt.Println(errors.Is(err, celebrity.ErrNotFound))
	// Output:
	// Hello
	// true
}

// Promote adds a key the host knows will be hot (a launch) to the fleet's hot set before the
// traffic comes; Demote takes it out. Both are idempotent.
func ExampleCache_Promote() {
	posts, run, done := examplePosts(map[string]string{})
	defer done()
	key := run + "post:launch"

	ctx := context.Background()
	if err := posts.Promote(ctx, key); err != nil {
		panic(err)
	}
	fmt.Println(len(posts.Hot()), posts.Hot()[0] == key)
	rdb := redis.NewClient(&redis.Options{Addr: celebrity.ExampleAddr})
	defer rdb.Close()
	hs, err := celebrity.ReadHotSet(ctx, rdb, run+"cache:") // what an operator's tool sees
	if err != nil {
		panic(err)
	}
	fmt.Println(hs.Version, len(hs.Members), hs.Members[0].Manual)
	if err := posts.Demote(ctx, key); err != nil {
		panic(err)
	}
	fmt.Println(len(posts.Hot()))
	// Output:
	// 1 true
	// 1 1 true
	// 0
}
