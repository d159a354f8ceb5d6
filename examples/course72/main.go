// Command course72 follows one online course through a launch day. Its page view counter is
// a striped counter (stripes): viewers' events are retried, and the stripe count is raised
// mid-stream. Its 100 seats are an escrow limit (escrow): 300 buyers race for them, and a
// buyer whose reply was lost retries and gets the same seat. Each sale is confirmed in the
// course's routed record store (routing). Then the course's records move to a new shard
// (migrate) while a client whose confirmation reply was lost retries through its stale route
// and finds its confirmation on the new owner.
//
// It exits non-zero when an invariant breaks: the view count differs from the number of
// distinct events, a seat was sold twice or more than 100 were sold, the lost buyer got a
// second seat, a confirmation was lost or duplicated by the move, or the old shard still
// accepted a write after it.
//
// The move needs Redis 7 or later: migrate reads XINFO STREAM's entries-added and
// max-deleted-entry-id, which the embedded server (miniredis) does not report. Without a
// configured server the example runs the other parts and says that the move was not run.
//
//	go run ./course72                                   # embedded in-process Redis
//	REDIS_ADDR=127.0.0.1:6379 go run ./course72
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
		fmt.Fprintln(os.Stderr, "course72:", err)
		os.Exit(2)
	}
	defer t.Close()
	fmt.Println("course72: launch day of course 72 — views, 100 seats, and a move to a new shard")
	fmt.Printf("running against: %s\n", t.Desc)
	shards, where, err := t.Shards("a", "b")
	if err != nil {
		fmt.Fprintln(os.Stderr, "course72:", err)
		os.Exit(2)
	}
	fmt.Printf("route table and journal on the target above; shards %s\n\n", where)

	run := fmt.Sprintf("celebrity-example-%d", time.Now().UnixNano())
	var c checker
	if err := views(ctx, t, run, &c); err != nil {
		fail(err)
	}
	sold, err := seats(ctx, t, run, &c)
	if err != nil {
		fail(err)
	}
	if err := move(ctx, t, shards, run, sold, &c); err != nil {
		fail(err)
	}
	c.exit("course72")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "course72:", err)
	os.Exit(1)
}
