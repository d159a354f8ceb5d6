// Command celebrity replays a viral post: 100 instances of a service read posts, and half of
// all reads are for one post. It runs the same traffic four times — without protection, with
// an in-process cache per instance (l1cache), with copies of the hot post on distinct nodes
// (replicas), and with both — and prints the Redis commands per node, the skew factor
// (busiest node / mean) and how often the source database was loaded. Each instance runs a
// hot-key detector (hotkeys) over its own requests and promotes the post to replicas when it
// becomes hot.
//
// It exits non-zero when an invariant breaks: a read returned the wrong value, a post was
// loaded from the source more than once for the whole fleet with replicas, an instance's
// cache loaded a post twice, the detector missed the post or flagged another, or (with more
// than one node) the replicas did not lower the skew.
//
//	go run ./celebrity                                  # embedded in-process Redis
//	REDIS_CLUSTER_ADDRS=127.0.0.1:7000 go run ./celebrity
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/celebrity-go/celebrity/examples/internal/env"
)

func main() {
	instances := flag.Int("instances", 100, "simulated service instances")
	reads := flag.Int("reads", 100, "reads per instance")
	share := flag.Float64("share", 0.5, "share of reads that go to the viral post")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t, err := env.Connect(ctx, env.Options{EmbeddedNodes: 3})
	if err != nil {
		fmt.Fprintln(os.Stderr, "celebrity:", err)
		os.Exit(2)
	}
	defer t.Close()
	fmt.Printf("celebrity: a viral post read by %d instances, %d reads each, %.0f%% of them for the post\n",
		*instances, *reads, *share*100)
	fmt.Printf("running against: %s\n\n", t.Desc)

	sc := scenario{
		t: t, instances: *instances, reads: *reads, share: *share,
		run: fmt.Sprintf("celebrity-example:%d:", time.Now().UnixNano()),
	}
	var results []result
	for _, s := range strategies {
		r, err := sc.runStrategy(ctx, s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "celebrity: %s: %v\n", s, err)
			os.Exit(1)
		}
		results = append(results, r)
	}
	printTable(t, results)
	check(t, results)
}

func printTable(t *env.Target, rs []result) {
	nodes := t.Masters()
	fmt.Printf("%-9s %9s  %-26s %6s  %-22s %8s %8s\n", "strategy", "redis ops", "ops per node", "skew",
		"source loads post/all", "L1 hits", "time")
	for _, r := range rs {
		per := make([]string, len(r.perNode))
		for i, v := range r.perNode {
			per[i] = fmt.Sprint(v)
		}
		fmt.Printf("%-9s %9d  %-26s %6.2f  %10d / %-9d %8d %8s\n", r.strategy, r.redisOps,
			strings.Join(per, " / "), r.skew, r.viralLoads, r.sourceLoads, r.l1Hits,
			r.elapsed.Round(time.Millisecond))
	}
	fmt.Printf("nodes: %s\n", strings.Join(nodes, ", "))
	for _, r := range rs {
		if r.view != "" {
			fmt.Printf("hotkeys on instance 0 (%s): %s\n", r.strategy, r.view)
		}
	}
	fmt.Println()
}

func check(t *env.Target, rs []result) {
	var c env.Checker
	by := map[string]result{}
	for _, r := range rs {
		by[r.strategy] = r
		c.Check(r.wrong == 0 && r.errs == 0, "%s: every read returned the source's value (%d wrong, %d errors)",
			r.strategy, r.wrong, r.errs)
		c.Check(r.detected == r.instances && r.falseHot == 0,
			"%s: the detector of every instance flagged the post and nothing else (%d of %d, %d other keys)",
			r.strategy, r.detected, r.instances, r.falseHot)
	}
	for _, s := range []string{"replicas", "both"} {
		r := by[s]
		c.Check(r.viralLoads == 1 && r.sourceLoads == r.distinct,
			"%s: each post reached the source once for the whole fleet (post %d, all %d for %d distinct posts)",
			s, r.viralLoads, r.sourceLoads, r.distinct)
	}
	for _, s := range []string{"l1", "both"} {
		r := by[s]
		c.Check(int64(r.l1Loads) <= r.perInstanceDistinct,
			"%s: each instance's cache loaded each post at most once (%d loads, %d distinct per-instance posts)",
			s, r.l1Loads, r.perInstanceDistinct)
	}
	if len(t.Masters()) > 1 {
		c.Check(by["replicas"].skew < by["naive"].skew,
			"replicas spread the post over the nodes: skew %.2f < %.2f without protection",
			by["replicas"].skew, by["naive"].skew)
	} else {
		fmt.Println("  note  one node only: skew is 1 by definition; run on a cluster to see it move")
	}
	c.Exit("celebrity")
}
