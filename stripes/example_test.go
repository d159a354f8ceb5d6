package stripes_test

import (
	"context"
	"fmt"
	"time"

	"github.com/celebrity-go/celebrity/stripes"
	"github.com/redis/go-redis/v9"
)

// A view counter split into 16 stripes; each view counts once however often it is retried.
func ExampleCounter_Add() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}})
	c, err := stripes.New(rdb, stripes.Options{Name: "course:72:views", Stripes: 16})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	view := stripes.Event{ID: "view-8f14e45f", Time: time.Now()}
	for attempt := 0; attempt < 3; attempt++ {
		res, err := c.Add(ctx, view, 1)
		if err == nil {
			fmt.Println("counted now:", res.Applied)
			break
		}
		// The reply was lost or the call failed: retry with the same Event.
	}
}

// A host without event timestamps stamps each event once and stores the stamp with it.
func ExampleCounter_Stamp() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	c, err := stripes.New(rdb, stripes.Options{Name: "downloads", Stripes: 8})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	ev, err := c.Stamp(ctx, "download-1234")
	if err != nil {
		panic(err)
	}
	// ... persist ev with the job; every retry of the job calls Add(ctx, ev, 1).
	_, _ = c.Add(ctx, ev, 1)
}

// Changing the stripe count opens a new generation; retries of older events keep going to
// the stripes that counted them.
func ExampleCounter_Resize() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	c, err := stripes.New(rdb, stripes.Options{Name: "course:72:views", Stripes: 4})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	gen, err := c.Resize(context.Background(), 16)
	fmt.Println(gen, err)
}

// A dashboard reads the count through a cached reader: a storm of reads costs one Sum per
// interval.
func ExampleReader() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	c, err := stripes.New(rdb, stripes.Options{Name: "course:72:views", Stripes: 16})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	r, err := stripes.NewReader(c, stripes.ReaderOptions{MaxStaleness: time.Minute})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	n, err := r.Value(context.Background())
	fmt.Println(n, err)
}

// Views per post: one Family for every post, one stripe per post until a post gets hot.
func ExampleFamily() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}})
	views, err := stripes.NewFamily(rdb, stripes.FamilyOptions{
		Counter:    stripes.Options{Prefix: "views:"},
		HotStripes: 16,   // a hot post is spread over 16 stripes...
		HotRate:    2000, // ...from 2,000 views per second through this process
	})
	if err != nil {
		panic(err)
	}
	defer views.Close()

	ctx := context.Background()
	now := time.Now()
	_, errs := views.AddBatch(ctx, []stripes.FamilyAddition{
		{Name: "post:1", Event: stripes.Event{ID: "view-a1", Time: now}, Delta: 1},
		{Name: "post:2", Event: stripes.Event{ID: "view-b7", Time: now}, Delta: 1},
	})
	_ = errs // retry each failed addition with the same Event
	counts, _ := views.SumMany(ctx, []string{"post:1", "post:2"})
	fmt.Println(counts)
}
