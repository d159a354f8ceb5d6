// Command bench is the load harness of celebrity: it reproduces the celebrity scenario on a
// real Redis Cluster of three masters and measures what each defence changes.
//
// Traffic is Zipf(alpha) over -keys keys plus one celebrity key that takes -share of all
// reads (default 50%). Simulated service instances (each with its own l1cache and
// replicas.Replicator over one cluster client) read through four paths — naive (Redis, then
// the source on a miss), L1 (l1cache in front), replicas (three copies of the celebrity on
// distinct masters, fleet-wide fill lease) and both. Every strategy makes the same reads: one
// key sequence drawn from a seeded Zipf (-seed), paced open loop at -rate reads per second
// (-warmup of unmeasured reads, then -duration measured), read i made by instance i mod
// -instances. For every run it prints throughput, p50/p99 read latency, how late reads
// started against their schedule, the commands each master executed (INFO commandstats
// deltas), the skew factor (busiest master / mean), the source loads, and the Redis commands
// and round trips per read, counted on the servers and by a client hook, split into cold
// reads (the first read of a key) and warm ones, with their ratios to naive. A
// mass-expiry run then reads a set of hot keys, all missing at the same instant, from every
// instance at once, and counts the source loads with and without singleflight and lease.
// The chart of per-node load per strategy is written as a PNG.
//
// With -timeseries it runs the closed loop instead: 100 instances of celebrity.Cache, a
// celebrity that appears at t=10s, takes -share of the reads and fades at t=40s, per-node
// commands per second sampled over time, and the loop's targets (detection, promotion on
// every instance, skew, demotion, flaps, the loop's own share of commands, source loads)
// printed and charted with a mark per instance's promotion and demotion.
//
// Without -addrs it starts its own three-master cluster of redis-server processes on free
// loopback ports and stops it at the end.
//
//	go run . -duration 10s -out results/celebrity.png
//	go run . -addrs 127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002
//	go run . -timeseries -keys 100000 -out results/closed-loop.png
//	go run . -timeseries -instances 4 -promote-rate 30 -summary-shards 16 -out /tmp/small-fleet.png
//	go run . -timeseries -keys 100000 -instances 1000 -loop-defaults -out /tmp/large-fleet.png
//
// The last one is a small fleet: 4 instances with an L1 fresh window of 100 ms read a key at
// 40 Redis-level reads per second at most, so PromoteRate must be under that (see the
// README on choosing PromoteRate), and with it every report of a key at PromoteRate/16 on its
// summary shard nudges the leader.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

type config struct {
	addrs           string
	server          string
	duration        time.Duration
	warmup          time.Duration
	alpha           float64
	share           float64
	keys            int
	instances       int
	workers         int
	sourceLatency   time.Duration
	ttl             time.Duration
	l1Fresh         time.Duration
	expiryKeys      int
	expiryInstances int
	expiryReaders   int
	expiryReads     int
	expiryLatency   time.Duration
	out             string
	only            string
	timeseries      bool
	tsPromote       float64
	tsShards        int
	tsDefaults      bool
	rate            int
	seed            uint64
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addrs, "addrs", "", "seed addresses of a Redis Cluster, comma-separated; empty: start a 3-master cluster")
	flag.StringVar(&cfg.server, "redis-server", "redis-server", "redis-server binary for the own cluster")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "length of each strategy's run")
	flag.DurationVar(&cfg.warmup, "warmup", 3*time.Second, "unmeasured reads before each strategy's run")
	flag.Float64Var(&cfg.alpha, "alpha", 0.99, "Zipf exponent of the key popularity (> 0)")
	flag.Float64Var(&cfg.share, "share", 0.5, "share of reads that go to the celebrity key, 0..1")
	flag.IntVar(&cfg.keys, "keys", 1_000_000, "number of ordinary keys")
	flag.IntVar(&cfg.instances, "instances", 100, "simulated service instances")
	flag.IntVar(&cfg.workers, "workers", 64, "most reads in flight at once (a read due while all are busy starts late)")
	flag.IntVar(&cfg.rate, "rate", 6000, "reads per second every strategy is offered (open loop, paced)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the key sequence every strategy reads")
	flag.DurationVar(&cfg.sourceLatency, "source-latency", time.Millisecond, "time one source load takes")
	flag.DurationVar(&cfg.ttl, "ttl", 10*time.Minute, "TTL of the values written to Redis")
	flag.DurationVar(&cfg.l1Fresh, "l1-fresh", time.Second, "l1cache fresh window")
	flag.IntVar(&cfg.expiryKeys, "expiry-keys", 100, "hot keys (besides the celebrity) in the mass-expiry run")
	flag.IntVar(&cfg.expiryInstances, "expiry-instances", 20, "instances in the mass-expiry run")
	flag.IntVar(&cfg.expiryReaders, "expiry-readers", 10, "concurrent readers per instance in the mass-expiry run")
	flag.IntVar(&cfg.expiryReads, "expiry-reads", 20, "reads per reader in the mass-expiry run")
	flag.DurationVar(&cfg.expiryLatency, "expiry-latency", 10*time.Millisecond, "time one source load takes in the mass-expiry run")
	flag.StringVar(&cfg.out, "out", "results/celebrity.png", "PNG chart to write; empty: none")
	flag.StringVar(&cfg.only, "strategies", strings.Join(strategies, ","), "strategies to run, comma-separated")
	flag.BoolVar(&cfg.timeseries, "timeseries", false, "run the closed-loop time series (celebrity.Cache) instead of the strategies")
	flag.Float64Var(&cfg.tsPromote, "promote-rate", 300, "with -timeseries: Options.Loop.PromoteRate (DemoteRate is a quarter of it)")
	flag.IntVar(&cfg.tsShards, "summary-shards", 2, "with -timeseries: Options.Loop.SummaryShards")
	flag.BoolVar(&cfg.tsDefaults, "loop-defaults", false, "with -timeseries: the library's default loop options (PromoteRate, DemoteRate, Hold, the report options, SummaryShards), not the harness's")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	flag.Parse()
	if err := validate(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func validate(cfg config) error {
	switch {
	case cfg.alpha <= 0:
		return fmt.Errorf("-alpha must be > 0, got %v", cfg.alpha)
	case cfg.share < 0 || cfg.share > 1:
		return fmt.Errorf("-share must be 0..1, got %v", cfg.share)
	case cfg.keys < 1 || cfg.instances < 1 || cfg.workers < 1 || cfg.expiryKeys < 1 || cfg.expiryReads < 1 ||
		cfg.expiryInstances < 1 || cfg.expiryReaders < 1:
		return fmt.Errorf("-keys, -instances, -workers and the -expiry-* counts must be >= 1")
	case cfg.rate < 1:
		return fmt.Errorf("-rate must be >= 1, got %d", cfg.rate)
	case cfg.tsPromote <= 0 || cfg.tsShards < 1:
		return fmt.Errorf("-promote-rate must be > 0 and -summary-shards >= 1, got %v and %d", cfg.tsPromote, cfg.tsShards)
	case cfg.duration <= 0:
		return fmt.Errorf("-duration must be > 0, got %v", cfg.duration)
	}
	return nil
}

func run(ctx context.Context, cfg config) error {
	seeds := strings.Split(cfg.addrs, ",")
	where := "Redis Cluster at " + cfg.addrs
	if cfg.addrs == "" {
		fmt.Fprintln(os.Stderr, "starting a 3-master cluster of redis-server processes on loopback ports")
		own, err := startCluster(ctx, cfg.server)
		if err != nil {
			return err
		}
		defer own.stop()
		seeds = own.addrs
		where = "own 3-master Redis Cluster (" + strings.Join(own.addrs, ", ") + ")"
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, PoolSize: cfg.workers + 16})
	defer c.Close()
	rc := &readCounter{}
	if !cfg.timeseries {
		c.AddHook(rc) // before any command: hooks are not added while commands run
	}
	nodes, err := masters(ctx, c)
	if err != nil {
		return err
	}
	srv, _ := c.Info(ctx, "server").Result()
	version := "?"
	for _, l := range strings.Split(srv, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			version = v
		}
	}
	fmt.Printf("celebrity load harness: %s, redis %s, %d masters\n", where, version, len(nodes))
	if cfg.timeseries {
		return runTimeseries(ctx, c, nodes, cfg)
	}
	z := newZipf(cfg.keys, cfg.alpha)
	seq := newSequence(z, cfg)
	cold := 0
	for _, f := range seq.first[seq.warm:] {
		if f {
			cold++
		}
	}
	fmt.Printf("traffic: Zipf(%.2f) over %d keys + 1 celebrity key at %.0f%% of reads; %d instances, at most %d reads in flight, "+
		"source load %v, l1cache fresh %v, replicas 3 copies; every strategy makes the same sequence (seed %d) paced at %d reads/s: "+
		"%d warm-up reads (%v) then %d measured (%v), %d of them (%.1f%%) the first read of their key\n\n",
		cfg.alpha, cfg.keys, cfg.share*100, cfg.instances, cfg.workers, cfg.sourceLatency, cfg.l1Fresh,
		cfg.seed, cfg.rate, seq.warm, cfg.warmup, len(seq.ranks)-seq.warm, cfg.duration, cold,
		100*float64(cold)/float64(max(len(seq.ranks)-seq.warm, 1)))

	var runs []runResult
	for _, s := range strings.Split(cfg.only, ",") {
		if !slices.Contains(strategies, s) {
			return fmt.Errorf("unknown strategy %q (want some of %s)", s, strings.Join(strategies, ","))
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r, err := runStrategy(ctx, c, nodes, seq, rc, cfg, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		runs = append(runs, r)
	}
	printRuns(nodes, runs)

	fmt.Fprintf(os.Stderr, "mass-expiry run: %d hot keys + the celebrity, %d readers\n", cfg.expiryKeys,
		cfg.expiryInstances*cfg.expiryReaders)
	var exps []expiryResult
	for _, m := range expiryModes {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e, err := runExpiry(ctx, c, cfg, m.name, m.strategy)
		if err != nil {
			return fmt.Errorf("expiry %s: %w", m.name, err)
		}
		e.guard = m.guard
		exps = append(exps, e)
	}
	printExpiry(cfg, exps)

	if cfg.out != "" {
		if err := writeChart(cfg.out, cfg, nodes, runs, exps); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		fmt.Printf("\nchart: %s\n", cfg.out)
	}
	for _, r := range runs {
		if r.errs > 0 || r.wrong > 0 {
			return fmt.Errorf("%s: %d errors and %d wrong values in %d reads", r.strategy, r.errs, r.wrong, r.reads)
		}
	}
	for _, e := range exps {
		if e.errs > 0 || e.wrong > 0 {
			return fmt.Errorf("expiry %s: %d errors and %d wrong values in %d reads", e.mode, e.errs, e.wrong, e.reads)
		}
	}
	return nil
}

func printRuns(nodes []string, runs []runResult) {
	head := fmt.Sprintf("| %-8s | %10s | %9s | %9s |", "strategy", "reads/s", "p50", "p99")
	sep := "|----------|-----------:|----------:|----------:|"
	for i := range nodes {
		head += fmt.Sprintf(" %10s |", fmt.Sprintf("node %d/s", i+1))
		sep += "-----------:|"
	}
	head += fmt.Sprintf(" %5s | %12s | %11s |", "skew", "source loads", "celebrity")
	sep += "------:|-------------:|------------:|"
	fmt.Println(head)
	fmt.Println(sep)
	for _, r := range runs {
		s := r.elapsed.Seconds()
		line := fmt.Sprintf("| %-8s | %10.0f | %9s | %9s |", r.strategy, float64(r.reads)/s,
			r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond))
		for _, v := range r.perNode {
			line += fmt.Sprintf(" %10.0f |", float64(v)/s)
		}
		line += fmt.Sprintf(" %5.2f | %12d | %11d |", r.skew, r.sourceLoads, r.celebLoads)
		fmt.Println(line)
	}
	for i, n := range nodes {
		fmt.Printf("node %d = %s\n", i+1, n)
	}
	for _, r := range runs {
		names := make([]string, 0, len(r.perCommand))
		for k := range r.perCommand {
			names = append(names, k)
		}
		slices.SortFunc(names, func(a, b string) int { return int(r.perCommand[b]) - int(r.perCommand[a]) })
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = fmt.Sprintf("%s %.2f", k, float64(r.perCommand[k])/float64(max(r.reads, 1)))
		}
		fmt.Printf("commands per read, %-8s: %s\n", r.strategy, strings.Join(parts, ", "))
	}
	printPerRead(runs)
	fmt.Println("node N/s: data commands per second on that master (INFO commandstats delta); skew: busiest master / mean;")
	fmt.Println("source loads: loads of the simulated database (all keys / the celebrity); errors and wrong values: none, or the run fails.")
	fmt.Println()
}

func printExpiry(cfg config, exps []expiryResult) {
	fmt.Printf("mass expiry: %d hot keys + the celebrity (%.0f%% of reads), all missing at the same instant, read by %d readers "+
		"on each of %d instances (%d reads each); source load %v\n", cfg.expiryKeys, cfg.share*100, cfg.expiryReaders,
		cfg.expiryInstances, cfg.expiryReads, cfg.expiryLatency)
	fmt.Printf("| %-12s | %-47s | %6s | %13s | %12s | %15s | %8s |\n", "mode", "what guards the source", "reads",
		"distinct keys", "source loads", "celebrity loads", "time")
	fmt.Println("|--------------|-------------------------------------------------|-------:|--------------:|-------------:|----------------:|---------:|")
	for _, e := range exps {
		fmt.Printf("| %-12s | %-47s | %6d | %13d | %12d | %15d | %8s |\n", e.mode, e.guard, e.reads, e.distinct,
			e.sourceLoads, e.celebLoads, e.elapsed.Round(time.Millisecond))
	}
}

// printPerRead prints, per strategy, the Redis commands per read counted on the servers and
// those the reads sent, all and split into cold reads (the first read of a key) and warm
// ones, with the ratios to naive and how far the run fell behind its paced target. The
// servers' count split by class gives each class the commands its reads sent plus the
// commands run inside their script calls (server total less all sent, shared out by script
// calls; exact when only one class calls scripts).
func printPerRead(runs []runResult) {
	var naive *runResult
	for i := range runs {
		if runs[i].strategy == "naive" {
			naive = &runs[i]
		}
	}
	per := func(n, d int64) float64 { return float64(n) / float64(max(d, 1)) }
	type row struct{ srv, sent, srvCold, sentCold, tripsCold, srvWarm, sentWarm, tripsWarm float64 }
	rowOf := func(r runResult) row {
		var total int64
		for _, v := range r.perNode {
			total += int64(v)
		}
		co, wa := r.sent[classCold], r.sent[classWarm]
		inner := float64(total - co.cmds - wa.cmds - r.unattributed)
		innerCold, innerWarm := 0.0, 0.0
		if sc := co.scripts + wa.scripts; sc > 0 {
			innerCold = inner * float64(co.scripts) / float64(sc)
			innerWarm = inner - innerCold
		}
		return row{
			srv: per(total, r.reads), sent: per(co.cmds+wa.cmds, r.reads),
			srvCold: (float64(co.cmds) + innerCold) / float64(max(co.reads, 1)), sentCold: per(co.cmds, co.reads),
			tripsCold: per(co.trips, co.reads),
			srvWarm:   (float64(wa.cmds) + innerWarm) / float64(max(wa.reads, 1)), sentWarm: per(wa.cmds, wa.reads),
			tripsWarm: per(wa.trips, wa.reads),
		}
	}
	var ref row
	if naive != nil {
		ref = rowOf(*naive)
	}
	x := func(v, r float64) string {
		if naive == nil || r == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", v/r)
	}
	fmt.Println()
	fmt.Println("| strategy | reads | late mean / max | server cmds/read | ×naive | sent cmds/read | ×naive | " +
		"cold reads | cold server | ×naive | cold sent | ×naive | cold trips | warm server | ×naive | warm sent | ×naive | warm trips | unattributed |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range runs {
		w := rowOf(r)
		fmt.Printf("| %s | %d | %v / %v | %.3f | %s | %.3f | %s | %d | %.3f | %s | %.3f | %s | %.3f | %.3f | %s | %.3f | %s | %.3f | %d |\n",
			r.strategy, r.reads, r.lagMean.Round(time.Microsecond), r.lagMax.Round(time.Millisecond),
			w.srv, x(w.srv, ref.srv), w.sent, x(w.sent, ref.sent),
			r.sent[classCold].reads, w.srvCold, x(w.srvCold, ref.srvCold), w.sentCold, x(w.sentCold, ref.sentCold), w.tripsCold,
			w.srvWarm, x(w.srvWarm, ref.srvWarm), w.sentWarm, x(w.sentWarm, ref.sentWarm), w.tripsWarm, r.unattributed)
	}
	fmt.Println("per read: server = INFO commandstats deltas over all masters (a script call and each command it runs count); " +
		"sent = commands the reads sent (client hook; a script call is one); trips = round trips (a pipeline is one); " +
		"cold = the first read of a key in the sequence, warm = the rest; late = how long after its scheduled moment " +
		"a read started (small: the run kept its pace)")
}
