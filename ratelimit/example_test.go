package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/ratelimit"
)

// Exact mode: one GCRA call per request; 3 per minute with a burst of 3.
func ExampleLimiter_Allow() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	lim, err := ratelimit.New(rdb, ratelimit.Options{
		Limit:  ratelimit.Limit{Rate: 3, Period: time.Minute},
		Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano()), // fresh keys per run
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	ctx := context.Background()
	for range 4 {
		res, err := lim.Allow(ctx, "user:1")
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Allowed, res.Remaining, res.RetryAfter > 0)
	}
	// Output:
	// true 2 false
	// true 1 false
	// true 0 false
	// false 0 true
}

// Leased mode for a hot merchant: chunks of the budget are taken from three budget slots
// and spent locally, so most requests make no Redis call, and the limit still holds.
func ExampleNew_leased() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	lim, err := ratelimit.New(rdb, ratelimit.Options{
		Limit:  ratelimit.Limit{Rate: 1000, Period: time.Minute},
		Mode:   ratelimit.Leased,
		Slots:  3,
		Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano()),
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	ctx := context.Background()
	admitted := 0
	for range 1500 {
		if res, err := lim.Allow(ctx, "merchant:42"); err == nil && res.Allowed {
			admitted++
		}
	}
	st := lim.Stats()
	fmt.Println("admitted:", admitted)
	fmt.Println("fewer Redis calls than requests:", st.Calls < 1500/10)
	// Output:
	// admitted: 1000
	// fewer Redis calls than requests: true
}

// Bad input is refused with an error naming the field and the allowed range.
func ExampleNew_invalid() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	_, err := ratelimit.New(rdb, ratelimit.Options{
		Limit: ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 20},
	})
	fmt.Println(err)
	// Output:
	// ratelimit: invalid argument: Options.Limit.Burst must be 0..Rate (10), got 20
}

// AllowN asks for several cells at once: all of them are admitted, or none.
func ExampleLimiter_AllowN() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	lim, err := ratelimit.New(rdb, ratelimit.Options{
		Limit:  ratelimit.Limit{Rate: 5, Period: time.Minute},
		Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano()),
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	ctx := context.Background()
	res, _ := lim.AllowN(ctx, "upload:7", 2)
	fmt.Println(res.Allowed, res.Remaining)
	res, _ = lim.AllowN(ctx, "upload:7", 4)
	fmt.Println(res.Allowed, res.Remaining)
	_, err = lim.AllowN(ctx, "upload:7", 6)
	fmt.Println(err)
	// Output:
	// true 3
	// false 3
	// ratelimit: invalid argument: cost must be 1..5, got 6
}

// Approximate mode counts locally and syncs a shared estimate; one instance alone never
// passes the limit.
func ExampleNew_approximate() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	lim, err := ratelimit.New(rdb, ratelimit.Options{
		Limit:  ratelimit.Limit{Rate: 100, Period: time.Minute},
		Mode:   ratelimit.Approximate,
		Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano()),
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	ctx := context.Background()
	admitted := 0
	for range 150 {
		if res, err := lim.Allow(ctx, "search:3"); err == nil && res.Allowed {
			admitted++
		}
	}
	fmt.Println("admitted:", admitted)
	// Output:
	// admitted: 100
}

// Stats counts the answers and the Redis calls of this process.
func ExampleLimiter_Stats() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	lim, err := ratelimit.New(rdb, ratelimit.Options{
		Limit:  ratelimit.Limit{Rate: 2, Period: time.Minute},
		Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano()),
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	for range 3 {
		_, _ = lim.Allow(context.Background(), "user:1")
	}
	st := lim.Stats()
	fmt.Println(st.Allowed, st.Denied, st.Calls)
	// Output:
	// 2 1 3
}

// After Close every call returns ErrClosed; Close itself may be called again.
func ExampleLimiter_Close() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	lim, err := ratelimit.New(rdb, ratelimit.Options{Limit: ratelimit.Limit{Rate: 2, Period: time.Minute}})
	if err != nil {
		panic(err)
	}
	fmt.Println(lim.Close(), lim.Close())
	_, err = lim.Allow(context.Background(), "user:1")
	fmt.Println(errors.Is(err, ratelimit.ErrClosed))
	// Output:
	// <nil> <nil>
	// true
}

func ExampleMode_String() {
	fmt.Println(ratelimit.Exact, ratelimit.Leased, ratelimit.Approximate)
	// Output:
	// exact leased approximate
}

func ExampleWindow_String() {
	fmt.Println(ratelimit.WindowDefault, ratelimit.GCRA, ratelimit.Sliding, ratelimit.Fixed)
	// Output:
	// default gcra sliding fixed
}
