package celebrity_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity"
)

type Post struct {
	Title string
	Likes int
}

// db stands for the host's database.
var db = struct {
	Post  func(ctx context.Context, id string) (Post, uint64, error)
	Write func(ctx context.Context, id string, p Post) (uint64, error)
}{}

// ExampleNew wires the whole read path of a posts service: L1, fleet-wide fill lease, copies
// of hot posts, invalidation, and the fleet's own hot-key detection.
func ExampleNew() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}})
	posts, err := celebrity.New(rdb, func(ctx context.Context, id string) (Post, uint64, error) {
		return db.Post(ctx, id) // celebrity.ErrNotFound for an unknown id
	}, celebrity.Options[Post]{Fresh: time.Second, Stale: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	defer posts.Close()

	ctx := context.Background()
	p, err := posts.Get(ctx, "post:42")
	if errors.Is(err, celebrity.ErrNotFound) {
		fmt.Println("no such post")
	}

	// An update: the database first, then Set carries out the safe order.
	p.Likes++
	version, err := db.Write(ctx, "post:42", p)
	if err == nil {
		var werr *celebrity.WriteError
		if err := posts.Set(ctx, "post:42", p, version); errors.As(err, &werr) {
			fmt.Printf("step %s failed; older versions possible for %s; retrying\n", werr.Step, werr.MayServeOlderFor)
		}
	}

	// A launch known in advance: promote before the traffic arrives.
	_ = posts.Promote(ctx, "post:launch")
}
