package ratelimit_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/ratelimit"
)

// Peek shows how much of a key's limit is used, for an operator or a status page, without
// admitting anything: the two requests still fit after any number of looks.
func ExampleLimiter_Peek() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	lim, err := ratelimit.New(rdb, ratelimit.Options{
		Limit:  ratelimit.Limit{Rate: 5, Period: time.Minute},
		Window: ratelimit.Sliding,
		Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano()),
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	ctx := context.Background()
	if _, err := lim.AllowN(ctx, "user:1", 3); err != nil {
		panic(err)
	}
	for range 2 {
		u, err := lim.Peek(ctx, "user:1")
		if err != nil {
			panic(err)
		}
		fmt.Println(u.Used, u.Remaining, u.ResetAfter > 0, len(u.Slots))
	}
	res, err := lim.AllowN(ctx, "user:1", 2)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Allowed)
	// Output:
	// 3 2 true 1
	// 3 2 true 1
	// true
}

// Options reports the defaults New filled in.
func ExampleLimiter_Options() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	lim, err := ratelimit.New(rdb, ratelimit.Options{
		Limit: ratelimit.Limit{Rate: 100, Period: time.Second},
		Mode:  ratelimit.Leased,
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	o := lim.Options()
	fmt.Println(o.Window, o.SubWindows, o.Slots)
	// Output: sliding 10 3
}
