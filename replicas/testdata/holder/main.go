// Command holder is one fleet instance of replicas.Replicator run as its own process, for
// the tests that SIGKILL a fill lease's holder in the middle of its load. It calls GetOrLoad
// on one key with a loader that prints "loading" and then blocks until the process is
// killed.
//
// Usage: holder <comma-separated addresses> <cluster|standalone> <prefix> <key> <lease ms>
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/replicas"
)

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: holder <addrs> <cluster|standalone> <prefix> <key> <lease ms>")
		os.Exit(2)
	}
	addrs, mode, prefix, key := strings.Split(os.Args[1], ","), os.Args[2], os.Args[3], os.Args[4]
	ms, err := strconv.Atoi(os.Args[5])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var client redis.UniversalClient = redis.NewClient(&redis.Options{Addr: addrs[0]})
	if mode == "cluster" {
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	}
	r, err := replicas.New(client, replicas.Options{Prefix: prefix, Hot: []string{key}, LeaseTTL: time.Duration(ms) * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, err = r.GetOrLoad(context.Background(), key, time.Minute, func(context.Context, string) (replicas.Item, error) {
		fmt.Println("loading")
		select {} // killed mid-load
	})
	fmt.Fprintln(os.Stderr, "GetOrLoad returned:", err)
	os.Exit(1)
}
