package celebrity_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity"
)

type Post struct {
	Title string
	Likes int
}

// ExampleNew wires the whole read path of a posts service: L1, fleet-wide fill lease, copies
// of hot posts, invalidation, and the fleet's own hot-key detection. A map with a version per
// row stands for the service's database.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")}) // or a *redis.ClusterClient
	defer rdb.Close()
	type row struct {
		post    Post
		version uint64
	}
	var mu sync.Mutex
	table := map[string]row{"post:42": {Post{Title: "Hello"}, 1}}

	posts, err := celebrity.New(rdb, func(ctx context.Context, id string) (celebrity.Versioned[Post], error) {
		mu.Lock()
		defer mu.Unlock()
		r, ok := table[id]
		if !ok {
			return celebrity.Versioned[Post]{}, celebrity.ErrNotFound // an unknown id: cached as absent
		}
		return celebrity.Versioned[Post]{Value: r.post, Version: r.version}, nil
	}, celebrity.Options[Post]{
		Fresh:  time.Second,
		Stale:  10 * time.Second,
		Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano()), // keys of this run's own
	})
	if err != nil {
		panic(err)
	}
	defer posts.Close()

	ctx := context.Background()
	p, err := posts.Get(ctx, "post:42")
	fmt.Println(p.Title, p.Likes, err)
	_, err = posts.Get(ctx, "post:7")
	fmt.Println(errors.Is(err, celebrity.ErrNotFound))

	// An update: the database first, then Set carries out the safe order.
	p.Likes++
	mu.Lock()
	table["post:42"] = row{p, 2}
	mu.Unlock()
	var werr *celebrity.WriteError
	if err := posts.Set(ctx, "post:42", p, 2); errors.As(err, &werr) {
		fmt.Printf("step %s failed; older versions possible for %s; retrying\n", werr.Step, werr.MayServeOlderFor)
	}
	p, _ = posts.Get(ctx, "post:42")
	fmt.Println(p.Title, p.Likes)

	// A launch known in advance: promote before the traffic arrives.
	fmt.Println(posts.Promote(ctx, "post:launch"), posts.Hot())
	// Output:
	// Hello 0 <nil>
	// true
	// Hello 1
	// <nil> [post:launch]
}
