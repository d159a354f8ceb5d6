package l1cache_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/l1cache"
)

func ExampleNew() {
	prices := map[string]int{"sku:1": 1999}
	cache, err := l1cache.New(func(ctx context.Context, sku string) (int, error) {
		p, ok := prices[sku]
		if !ok {
			return 0, l1cache.ErrNotFound
		}
		return p, nil
	}, l1cache.Options[int]{MaxEntries: 10_000, Fresh: time.Second, Stale: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer cache.Close()

	p, err := cache.Get(context.Background(), "sku:1")
	fmt.Println(p, err)
	_, err = cache.Get(context.Background(), "sku:2")
	fmt.Println(errors.Is(err, l1cache.ErrNotFound))
	// Output:
	// 1999 <nil>
	// true
}

// table stands for the host's database in the examples: a map read by the loader, which
// counts its calls.
type table struct {
	mu    sync.Mutex
	rows  map[string]string
	loads int
}

func (t *table) load(_ context.Context, key string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loads++
	v, ok := t.rows[key]
	if !ok {
		return "", l1cache.ErrNotFound
	}
	return v, nil
}

func (t *table) write(key, v string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows[key] = v
}

// newExampleCache returns a cache over db whose entries stay fresh for the whole example.
func newExampleCache(db *table) *l1cache.Cache[string] {
	cache, err := l1cache.New(db.load, l1cache.Options[string]{MaxEntries: 1000, Fresh: time.Hour})
	if err != nil {
		panic(err)
	}
	return cache
}

// Get loads a key once and serves it from memory while it is fresh.
func ExampleCache_Get() {
	db := &table{rows: map[string]string{"user:1": "Ada"}}
	users := newExampleCache(db)
	defer users.Close()

	ctx := context.Background()
	for range 3 {
		name, err := users.Get(ctx, "user:1")
		fmt.Println(name, err)
	}
	st := users.Stats()
	fmt.Println("loads:", db.loads, "hits:", st.Hits, "misses:", st.Misses)
	// Output:
	// Ada <nil>
	// Ada <nil>
	// Ada <nil>
	// loads: 1 hits: 2 misses: 1
}

// Set stores a value the host already has (for example the one it just wrote), with no load.
func ExampleCache_Set() {
	db := &table{rows: map[string]string{}}
	users := newExampleCache(db)
	defer users.Close()

	users.Set("user:1", "Ada")
	name, err := users.Get(context.Background(), "user:1")
	fmt.Println(name, err, "loads:", db.loads)
	// Output:
	// Ada <nil> loads: 0
}

// Invalidate drops one key on this instance: the next Get loads it again.
func ExampleCache_Invalidate() {
	db := &table{rows: map[string]string{"user:1": "Ada"}}
	users := newExampleCache(db)
	defer users.Close()

	ctx := context.Background()
	name, _ := users.Get(ctx, "user:1")
	fmt.Println(name)
	db.write("user:1", "Ada Lovelace")
	name, _ = users.Get(ctx, "user:1") // still fresh
	fmt.Println(name)
	users.Invalidate("user:1")
	name, _ = users.Get(ctx, "user:1")
	fmt.Println(name)
	// Output:
	// Ada
	// Ada
	// Ada Lovelace
}

// InvalidateAll drops every key on this instance.
func ExampleCache_InvalidateAll() {
	db := &table{rows: map[string]string{"user:1": "Ada", "user:2": "Grace"}}
	users := newExampleCache(db)
	defer users.Close()

	ctx := context.Background()
	_, _ = users.Get(ctx, "user:1")
	_, _ = users.Get(ctx, "user:2")
	db.write("user:1", "Ada Lovelace")
	db.write("user:2", "Grace Hopper")
	users.InvalidateAll()
	a, _ := users.Get(ctx, "user:1")
	b, _ := users.Get(ctx, "user:2")
	fmt.Println(a, "/", b, "/ loads:", db.loads)
	// Output:
	// Ada Lovelace / Grace Hopper / loads: 4
}

// MarkAllStale ends every entry's fresh window; without a Stale window the next Get waits
// for a reload.
func ExampleCache_MarkAllStale() {
	db := &table{rows: map[string]string{"user:1": "Ada"}}
	users := newExampleCache(db)
	defer users.Close()

	ctx := context.Background()
	_, _ = users.Get(ctx, "user:1")
	db.write("user:1", "Ada Lovelace")
	users.MarkAllStale()
	name, _ := users.Get(ctx, "user:1")
	fmt.Println(name, "loads:", db.loads)
	// Output:
	// Ada Lovelace loads: 2
}

// instance is one service instance of the examples: a cache of Redis strings and the
// Invalidator that keeps it in step with the others.
type instance struct {
	cache *l1cache.Cache[string]
	inv   *l1cache.Invalidator
}

func newInstance(rdb *redis.Client, channel string) instance {
	cache, err := l1cache.New(func(ctx context.Context, key string) (string, error) {
		v, err := rdb.Get(ctx, key).Result() // any source; here Redis itself
		if errors.Is(err, redis.Nil) {
			return "", l1cache.ErrNotFound
		}
		return v, err
	}, l1cache.Options[string]{MaxEntries: 1000, Fresh: time.Hour})
	if err != nil {
		panic(err)
	}
	inv, err := l1cache.NewInvalidator(rdb, cache, l1cache.InvalidatorOptions{Channel: channel})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := inv.Ready(ctx); err != nil {
		panic(err)
	}
	return instance{cache, inv}
}

func (i instance) close() { _ = i.inv.Close(); _ = i.cache.Close() }

// received waits until inv has applied n invalidations from other instances.
func received(inv *l1cache.Invalidator, n uint64) {
	for deadline := time.Now().Add(30 * time.Second); inv.Stats().Received < n; {
		if time.Now().After(deadline) {
			panic("the invalidation did not arrive")
		}
		time.Sleep(time.Millisecond)
	}
}

// An Invalidator connects a cache to the other instances' caches over one pub/sub channel.
func ExampleNewInvalidator() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	run := fmt.Sprintf("example:%d:", time.Now().UnixNano()) // fresh keys per run
	cache, err := l1cache.New(func(ctx context.Context, key string) (string, error) {
		v, err := rdb.Get(ctx, key).Result() // any source; here Redis itself
		if errors.Is(err, redis.Nil) {
			return "", l1cache.ErrNotFound
		}
		return v, err
	}, l1cache.Options[string]{MaxEntries: 10_000, Fresh: time.Hour})
	if err != nil {
		panic(err)
	}
	defer cache.Close()
	inv, err := l1cache.NewInvalidator(rdb, cache, l1cache.InvalidatorOptions{Channel: run + "inv"})
	if err != nil {
		panic(err)
	}
	defer inv.Close()

	ctx := context.Background()
	_ = rdb.Set(ctx, run+"greeting", "hello", 0).Err()
	v, _ := cache.Get(ctx, run+"greeting")
	fmt.Println(v)
	// After a write, drop the key here and on every other instance.
	_ = rdb.Set(ctx, run+"greeting", "hello, world", 0).Err()
	if err := inv.Invalidate(ctx, run+"greeting"); err != nil {
		fmt.Println("other instances keep their copy until Fresh ends:", err)
	}
	v, _ = cache.Get(ctx, run+"greeting")
	fmt.Println(v)
	// Output:
	// hello
	// hello, world
}

// Invalidate on one instance drops the key on every instance subscribed to the channel.
func ExampleInvalidator_Invalidate() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	run := fmt.Sprintf("example:%d:", time.Now().UnixNano())
	a, b := newInstance(rdb, run+"inv"), newInstance(rdb, run+"inv")
	defer a.close()
	defer b.close()

	ctx := context.Background()
	key := run + "greeting"
	_ = rdb.Set(ctx, key, "hello", 0).Err()
	v, _ := b.cache.Get(ctx, key)
	fmt.Println("b:", v)

	_ = rdb.Set(ctx, key, "hello, world", 0).Err() // the write, done by instance a
	if err := a.inv.Invalidate(ctx, key); err != nil {
		panic(err)
	}
	received(b.inv, 1)
	v, _ = b.cache.Get(ctx, key)
	fmt.Println("b:", v)
	// Output:
	// b: hello
	// b: hello, world
}

// InvalidateAll drops every key on every instance, for example after a bulk import.
func ExampleInvalidator_InvalidateAll() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	run := fmt.Sprintf("example:%d:", time.Now().UnixNano())
	a, b := newInstance(rdb, run+"inv"), newInstance(rdb, run+"inv")
	defer a.close()
	defer b.close()

	ctx := context.Background()
	_ = rdb.MSet(ctx, run+"x", "1", run+"y", "2").Err()
	x, _ := b.cache.Get(ctx, run+"x")
	y, _ := b.cache.Get(ctx, run+"y")
	fmt.Println("b:", x, y)

	_ = rdb.MSet(ctx, run+"x", "10", run+"y", "20").Err() // the bulk import
	if err := a.inv.InvalidateAll(ctx); err != nil {
		panic(err)
	}
	received(b.inv, 1)
	x, _ = b.cache.Get(ctx, run+"x")
	y, _ = b.cache.Get(ctx, run+"y")
	fmt.Println("b:", x, y)
	// Output:
	// b: 1 2
	// b: 10 20
}

// Ready waits for the subscription, for example before a readiness probe reports the
// instance up.
func ExampleInvalidator_Ready() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	cache, err := l1cache.New(func(context.Context, string) (string, error) { return "", l1cache.ErrNotFound },
		l1cache.Options[string]{MaxEntries: 10})
	if err != nil {
		panic(err)
	}
	defer cache.Close()
	inv, err := l1cache.NewInvalidator(rdb, cache, l1cache.InvalidatorOptions{
		Channel: fmt.Sprintf("example:%d:inv", time.Now().UnixNano()),
	})
	if err != nil {
		panic(err)
	}
	defer inv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fmt.Println(inv.Ready(ctx), inv.Stats().Subscribed)
	// Output:
	// <nil> true
}
