package l1cache_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/redis/go-redis/v9"
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

func ExampleNewInvalidator() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	cache, err := l1cache.New(func(ctx context.Context, key string) (string, error) {
		v, err := rdb.Get(ctx, key).Result() // any source; here Redis itself
		if errors.Is(err, redis.Nil) {
			return "", l1cache.ErrNotFound
		}
		return v, err
	}, l1cache.Options[string]{MaxEntries: 10_000})
	if err != nil {
		panic(err)
	}
	defer cache.Close()
	inv, err := l1cache.NewInvalidator(rdb, cache, l1cache.InvalidatorOptions{Channel: "app:l1:inv"})
	if err != nil {
		panic(err)
	}
	defer inv.Close()

	ctx := context.Background()
	_ = rdb.Set(ctx, "greeting", "hello", 0).Err()
	// After a write, drop the key here and on every other instance.
	if err := inv.Invalidate(ctx, "greeting"); err != nil {
		fmt.Println("other instances keep their copy until Fresh ends:", err)
	}
}
