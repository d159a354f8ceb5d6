package hotkeys_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/redis/go-redis/v9"
)

// A detector on an injected clock, recording every call: one key takes half the traffic.
func ExampleNew() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate:   1,
		HotShare:     0.2,
		EvalInterval: -1, // the example calls Evaluate itself
		Clock:        func() time.Time { return now },
		OnHot: func(ev hotkeys.KeyEvent) {
			fmt.Printf("%s is hot: %.0f%% of the traffic\n", ev.Key, ev.Load.Share*100)
		},
	})
	if err != nil {
		panic(err)
	}
	defer d.Close()

	for i := range 1000 {
		d.Observe("post:viral")
		d.Observe("post:" + strconv.Itoa(i))
	}
	now = now.Add(2 * time.Second)
	d.Evaluate()

	top, _ := d.Top(1)
	fmt.Printf("top: %s at %.0f requests/s\n", top[0].Key, top[0].Rate)
	// Output:
	// post:viral is hot: 50% of the traffic
	// top: post:viral at 500 requests/s
}

// Attribute sampled load to the masters of a Redis Cluster and read the skew factor.
func ExampleClusterShards() {
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}})
	defer c.Close()
	shards, err := hotkeys.NewClusterShards(ctx, c)
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := hotkeys.New(hotkeys.Options{Shard: shards.Shard, AllShards: shards.Masters})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()

	d.Observe("post:viral") // on every request

	view, err := d.ShardView()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("skew %.1f; busiest master %v\n", view.Skew, view.Shards[0].Shard)
}

// Ask the server which keys it counts as most accessed (needs an LFU maxmemory-policy).
func ExampleProbe_ScanTop() {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	p, err := hotkeys.NewProbe(c)
	if err != nil {
		fmt.Println(err)
		return
	}
	top, err := p.ScanTop(ctx, hotkeys.ScanOptions{Match: "post:*", K: 5})
	if err != nil {
		fmt.Println(err) // errors.Is(err, hotkeys.ErrUnsupported) without an LFU policy
		return
	}
	for _, k := range top {
		fmt.Println(k.Key, k.Freq)
	}
}

// Attribute load to shards through any key-to-shard function, such as a routing table's
// lookup, and read the skew factor.
func ExampleDetector_ShardView() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	route := map[string]string{"tenant:big": "shard-a", "tenant:small": "shard-b"}
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate:   1,
		EvalInterval: -1,
		Clock:        func() time.Time { return now },
		Shard:        func(key string) string { return route[key] },
		AllShards:    func() []string { return []string{"shard-a", "shard-b", "shard-c", "shard-d"} },
	})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	for range 1600 {
		d.Observe("tenant:big")
	}
	for range 400 {
		d.Observe("tenant:small")
	}
	now = now.Add(2 * time.Second) // rates are measured over at least one sub-window (2s)

	view, _ := d.ShardView()
	for _, s := range view.Shards {
		fmt.Printf("%s %.0f/s\n", s.Shard, s.Rate)
	}
	fmt.Printf("skew %.1f\n", view.Skew)
	// Output:
	// shard-a 800/s
	// shard-b 200/s
	// shard-c 0/s
	// shard-d 0/s
	// skew 3.2
}
