package celebrity_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity"
)

// ExampleReadHotSet reads the hot set a fleet of Caches publishes, from a process that has
// no Cache (an operator tool, a status page).
func ExampleReadHotSet() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")}) // or a *redis.ClusterClient
	defer rdb.Close()
	ctx := context.Background()
	prefix := fmt.Sprintf("example:%d:", time.Now().UnixNano()) // the fleet's Options.Prefix

	hs, err := celebrity.ReadHotSet(ctx, rdb, prefix)
	if err != nil {
		panic(err)
	}
	fmt.Println("empty:", hs.Empty()) // no fleet under this prefix yet

	// An instance of the fleet promotes a launch by hand.
	posts, err := celebrity.New(rdb, func(ctx context.Context, id string) (celebrity.Versioned[string], error) {
		return celebrity.Versioned[string]{}, celebrity.ErrNotFound
	}, celebrity.Options[string]{Prefix: prefix})
	if err != nil {
		panic(err)
	}
	defer posts.Close()
	if err := posts.Promote(ctx, "post:launch"); err != nil {
		panic(err)
	}

	hs, err = celebrity.ReadHotSet(ctx, rdb, prefix)
	if err != nil {
		panic(err)
	}
	fmt.Println("empty:", hs.Empty(), "version:", hs.Version)
	for _, m := range hs.Members {
		fmt.Printf("%s manual=%v since a moment ago: %v\n", m.Key, m.Manual, time.Since(m.Since) < time.Minute)
	}
	// Output:
	// empty: true
	// empty: false version: 1
	// post:launch manual=true since a moment ago: true
}
