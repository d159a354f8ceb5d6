package hotkeys_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/hotkeys"
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

// Attribute sampled load to the masters of a Redis Cluster and read the skew factor: all of
// it on one of three masters is a skew of 3.
func ExampleClusterShards() {
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("REDIS_CLUSTER_ADDRS"), ",")})
	defer c.Close()
	shards, err := hotkeys.NewClusterShards(ctx, c)
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate:   1,
		EvalInterval: -1,
		Clock:        func() time.Time { return now },
		Shard:        shards.Shard,
		AllShards:    shards.Masters,
	})
	if err != nil {
		panic(err)
	}
	defer d.Close()

	for range 300 {
		d.Observe("post:viral") // on every request
	}
	now = now.Add(2 * time.Second)

	view, err := d.ShardView()
	if err != nil {
		panic(err)
	}
	fmt.Printf("skew %.1f over %d masters; the busiest holds post:viral: %v\n",
		view.Skew, len(view.Shards), view.Shards[0].Shard == shards.Shard("post:viral"))
	// Output:
	// skew 3.0 over 3 masters; the busiest holds post:viral: true
}

// NewClusterShards loads the slot map once; Shard then maps a key to its master's address
// with no I/O, and keys that share a hash tag share a master.
func ExampleNewClusterShards() {
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("REDIS_CLUSTER_ADDRS"), ",")})
	defer c.Close()
	shards, err := hotkeys.NewClusterShards(ctx, c)
	if err != nil {
		panic(err)
	}
	fmt.Println("masters:", len(shards.Masters()))
	fmt.Println(shards.Shard("{user:1}:profile") == shards.Shard("{user:1}:feed"))
	fmt.Println(shards.Shard("post:1") != "")
	// Output:
	// masters: 3
	// true
	// true
}

// Refresh reloads the slot map, for example after a resharding; on error the previous map
// stays in use.
func ExampleClusterShards_Refresh() {
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("REDIS_CLUSTER_ADDRS"), ",")})
	defer c.Close()
	shards, err := hotkeys.NewClusterShards(ctx, c)
	if err != nil {
		panic(err)
	}
	before := shards.Shard("post:1")
	fmt.Println(shards.Refresh(ctx), shards.Shard("post:1") == before, len(shards.Masters()))
	// Output:
	// <nil> true 3
}

// Shard is the key-to-master function a Detector's Options.Shard takes: it answers from the
// slot map in memory, with no I/O.
func ExampleClusterShards_Shard() {
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("REDIS_CLUSTER_ADDRS"), ",")})
	defer c.Close()
	shards, err := hotkeys.NewClusterShards(ctx, c)
	if err != nil {
		panic(err)
	}
	owner := make(map[string]bool)
	for i := range 100 {
		owner[shards.Shard("post:"+strconv.Itoa(i))] = true
	}
	master, err := c.MasterForKey(ctx, "post:1")
	if err != nil {
		panic(err)
	}
	fmt.Println(len(owner), shards.Shard("post:1") == master.Options().Addr)
	// Output:
	// 3 true
}

// exampleProbeData writes a hot key read a hundred times and a cold one never read, under a
// prefix of their own, on the examples' LFU server.
func exampleProbeData(ctx context.Context, c *redis.Client) (hot, cold string) {
	run := fmt.Sprintf("example:%d:", time.Now().UnixNano())
	hot, cold = run+"post:viral", run+"post:quiet"
	if err := c.MSet(ctx, hot, "x", cold, "y").Err(); err != nil {
		panic(err)
	}
	for range 100 {
		c.Get(ctx, hot)
	}
	return hot, cold
}

// NewProbe wraps the host's client; Capabilities says what each node offers: OBJECT FREQ
// needs an LFU maxmemory-policy.
func ExampleNewProbe() {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer c.Close()
	p, err := hotkeys.NewProbe(c)
	if err != nil {
		panic(err)
	}
	caps, err := p.Capabilities(ctx)
	if err != nil {
		panic(err)
	}
	for _, n := range caps {
		fmt.Println(n.Policy, n.ObjectFreq)
	}
	// Output:
	// allkeys-lfu true
}

// Capabilities tells a host, before it relies on the Probe, which nodes can answer it.
func ExampleProbe_Capabilities() {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer c.Close()
	p, err := hotkeys.NewProbe(c)
	if err != nil {
		panic(err)
	}
	caps, err := p.Capabilities(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(caps), caps[0].Node == os.Getenv("REDIS_ADDR"), caps[0].ObjectFreq)
	// Output:
	// 1 true true
}

// Freq asks the server how often it saw known keys accessed, highest first. The server's
// LFU counter is logarithmic and probabilistic, so the order is what to rely on.
func ExampleProbe_Freq() {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer c.Close()
	hot, cold := exampleProbeData(ctx, c)
	p, err := hotkeys.NewProbe(c)
	if err != nil {
		panic(err)
	}
	keys, err := p.Freq(ctx, []string{cold, hot, "example:missing"})
	if err != nil {
		panic(err) // errors.Is(err, hotkeys.ErrUnsupported) without an LFU policy
	}
	fmt.Println(len(keys), keys[0].Key == hot, keys[1].Key == cold, keys[0].Freq > keys[1].Freq)
	// Output:
	// 2 true true true
}

// Ask the server which keys it counts as most accessed (needs an LFU maxmemory-policy).
func ExampleProbe_ScanTop() {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer c.Close()
	hot, _ := exampleProbeData(ctx, c)
	p, err := hotkeys.NewProbe(c)
	if err != nil {
		panic(err)
	}
	run := strings.TrimSuffix(hot, "post:viral")
	top, err := p.ScanTop(ctx, hotkeys.ScanOptions{Match: run + "post:*", K: 1})
	if err != nil {
		panic(err) // errors.Is(err, hotkeys.ErrUnsupported) without an LFU policy
	}
	for _, k := range top {
		fmt.Println(strings.TrimPrefix(k.Key, run), k.Node == os.Getenv("REDIS_ADDR"))
	}
	// Output:
	// post:viral true
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

// detectorAt returns a detector that records every call, on a clock the example moves.
func detectorAt(now *time.Time, o hotkeys.Options) *hotkeys.Detector {
	o.SampleRate, o.EvalInterval = 1, -1
	o.Clock = func() time.Time { return *now }
	d, err := hotkeys.New(o)
	if err != nil {
		panic(err)
	}
	return d
}

// Observe is the call on the request path; Top reads the heaviest keys with their rates.
func ExampleDetector_Observe() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := detectorAt(&now, hotkeys.Options{})
	defer d.Close()

	for range 600 {
		d.Observe("post:viral")
	}
	for range 200 {
		d.Observe("post:1")
	}
	now = now.Add(2 * time.Second)
	top, _ := d.Top(2)
	for _, k := range top {
		fmt.Printf("%s %.0f/s %.0f%%\n", k.Key, k.Rate, k.Share*100)
	}
	// Output:
	// post:viral 300/s 75%
	// post:1 100/s 25%
}

// ObserveCost weighs each request, here by the bytes it returned: a key read rarely but
// large can carry most of the load.
func ExampleDetector_ObserveCost() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := detectorAt(&now, hotkeys.Options{})
	defer d.Close()

	for range 10 {
		d.ObserveCost("feed:big", 90_000)
	}
	for range 1000 {
		d.ObserveCost("user:1", 100)
	}
	now = now.Add(2 * time.Second)
	top, _ := d.Top(1)
	fmt.Printf("%s %.0f bytes/s %.0f%%\n", top[0].Key, top[0].Rate, top[0].Share*100)
	// Output:
	// feed:big 450000 bytes/s 90%
}

// Top returns the k heaviest keys, heaviest first.
func ExampleDetector_Top() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := detectorAt(&now, hotkeys.Options{})
	defer d.Close()

	for i, n := range []int{50, 300, 150} {
		for range n {
			d.Observe("post:" + strconv.Itoa(i))
		}
	}
	now = now.Add(2 * time.Second)
	top, err := d.Top(3)
	for _, k := range top {
		fmt.Printf("%s %.0f/s\n", k.Key, k.Rate)
	}
	fmt.Println(err)
	// Output:
	// post:1 150/s
	// post:2 75/s
	// post:0 25/s
	// <nil>
}

// Evaluate applies the thresholds and fires OnHot and OnCool; Hot lists the keys hot now.
func ExampleDetector_Evaluate() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := detectorAt(&now, hotkeys.Options{
		HotShare: 0.2,
		OnHot:    func(ev hotkeys.KeyEvent) { fmt.Println("hot:", ev.Key) },
	})
	defer d.Close()

	for i := range 1000 {
		d.Observe("post:viral")
		d.Observe("post:" + strconv.Itoa(i))
	}
	now = now.Add(2 * time.Second)
	fmt.Println("before:", d.Hot())
	d.Evaluate()
	fmt.Println("after:", d.Hot())
	// Output:
	// before: []
	// hot: post:viral
	// after: [post:viral]
}

// Hot returns the keys hot now, sorted: what a host reads to decide what to replicate.
func ExampleDetector_Hot() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := detectorAt(&now, hotkeys.Options{HotShare: 0.2})
	defer d.Close()

	for range 400 {
		d.Observe("post:b")
		d.Observe("post:a")
	}
	for i := range 200 {
		d.Observe("post:" + strconv.Itoa(i))
	}
	now = now.Add(2 * time.Second)
	d.Evaluate()
	fmt.Println(d.Hot())
	// Output:
	// [post:a post:b]
}

// Snapshot is one consistent reading for a metrics exporter.
func ExampleDetector_Snapshot() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := detectorAt(&now, hotkeys.Options{HotShare: 0.2, TopK: 2})
	defer d.Close()

	for i := range 1000 {
		d.Observe("post:viral")
		d.Observe("post:" + strconv.Itoa(i%4))
	}
	now = now.Add(2 * time.Second)
	d.Evaluate()
	snap := d.Snapshot()
	fmt.Printf("total %.0f/s, top %s, hot %v\n", snap.TotalRate, snap.Top[0].Key, snap.Hot)
	// Output:
	// total 1000/s, top post:viral, hot [post:viral]
}

// TotalRate is the rate of all observed load, the denominator of every share.
func ExampleDetector_TotalRate() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := detectorAt(&now, hotkeys.Options{})
	defer d.Close()

	for i := range 900 {
		d.Observe("post:" + strconv.Itoa(i%3))
	}
	now = now.Add(2 * time.Second)
	fmt.Printf("%.0f/s\n", d.TotalRate())
	// Output:
	// 450/s
}
