// Command killed is one fleet instance of celebrity.Cache run as its own process, for the
// test that SIGKILLs an instance in the middle of a promotion. It reads one key in a loop,
// prints "leader" once it holds the fleet's lease and "promoted" when it has applied the
// key's promotion, and runs until it is killed.
//
// Usage: killed <comma-separated cluster addresses> <prefix> <key>
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: killed <addrs> <prefix> <key>")
		os.Exit(2)
	}
	addrs, prefix, key := strings.Split(os.Args[1], ","), os.Args[2], os.Args[3]
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	var once sync.Once
	c, err := celebrity.New(client, func(context.Context, string) (celebrity.Versioned[string], error) {
		return celebrity.Versioned[string]{Value: "v1", Version: 1}, nil
	}, celebrity.Options[string]{
		Prefix: prefix, Fresh: 20 * time.Millisecond, Stale: -1,
		Loop: celebrity.LoopOptions{
			ReportInterval: 100 * time.Millisecond, PromoteRate: 100, DemoteRate: 10,
			Hold: 500 * time.Millisecond, SummaryShards: 4, ReportMinRate: 5,
		},

		OnEvent: func(ev celebrity.Event) {
			if ev.Kind == celebrity.EventPromoted && ev.Key == key {
				once.Do(func() { fmt.Println("promoted") })
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	for !c.Stats().Leader {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("leader")
	for range 4 {
		go func() {
			for {
				if v, err := c.Get(ctx, key); err == nil && v != "v1" {
					fmt.Fprintln(os.Stderr, "wrong value", v)
					os.Exit(1)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	select {}
}
