// Command tenants runs a multi-tenant cache: 100,000 merchants hash-routed over three shared
// shards by a versioned route table (routing). Merchant 42 grows until it takes half of all
// requests and its shard runs hot. It is moved to a dedicated shard in cache mode (migrate):
// its hottest keys, found by a hot-key detector (hotkeys), are copied with their remaining
// TTL, then an override flips it in a new table generation. The old copy stays until its TTL,
// so a rollback lands on a warm shard. Finally the merchant is spread over four shards.
// Then the durable path: merchant 7 keeps durable records in its shared bucket; it is carved
// out onto shard d and folded back into its bucket later, then carved out again and split
// over the four shards, each a durable migration, with its writes and its neighbours' writes
// flowing throughout (on a real Redis server only: the embedded default says that it skips
// these steps).
//
// It exits non-zero when an invariant breaks: a tenant routed to two shards, the shared
// shards unevenly loaded by ordinary tenants, a warmed key missing after the flip or after
// the rollback, a route table going back in generations, the spread not dividing the
// merchant's keys over the four shards, or an acknowledged durable write not reading back
// after a carve-out, fold-back or split.
//
//	go run ./tenants                                    # embedded in-process Redis
//	REDIS_ADDR=127.0.0.1:6379 go run ./tenants
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/celebrity-go/celebrity/examples/internal/redisenv"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t, err := redisenv.Connect(ctx, redisenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tenants:", err)
		os.Exit(2)
	}
	defer t.Close()
	fmt.Println("tenants: 100,000 merchants on shared shards a, b, c; merchant 42 outgrows its shard")
	fmt.Printf("running against: %s\n", t.Desc)
	shards, where, err := t.Shards("a", "b", "c", "d")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tenants:", err)
		os.Exit(2)
	}
	fmt.Printf("route table on the target above; shards %s\n\n", where)
	var c checker
	if err := run(ctx, t, shards, &c); err != nil {
		fmt.Fprintln(os.Stderr, "tenants:", err)
		os.Exit(1)
	}
	c.exit("tenants")
}
