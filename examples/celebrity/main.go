// Command celebrity replays a viral post through celebrity.Cache: 100 instances of a posts
// service read posts, and half of all reads are for one post. Each instance holds a
// celebrity.Cache; nobody tells it which post is viral. The fleet finds it from the reads it
// puts on Redis, promotes it (copies on every master, refresh-ahead in every instance's
// cache), and an editor's update reaches every instance through the cache's safe write
// order. The same traffic is first run without protection, for comparison.
//
// It prints Redis commands per 1,000 reads (the two runs last different times), per node and
// in all with the data commands apart from the fleet loop's own, the skew factor (busiest
// node / mean), source loads, and when the post was detected and promoted, and exits non-zero if an invariant broke: a read
// returned a value the database never held, the post was not promoted on every instance (or
// another post was), a post reached the database more than once for the whole fleet, the
// update did not reach every instance, or (on several nodes) the skew did not come down.
//
//	go run ./celebrity                                   # embedded in-process Redis
//	REDIS_CLUSTER_ADDRS=127.0.0.1:7000 go run ./celebrity
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/examples/internal/redisenv"
	"github.com/celebrity-go/celebrity/l1cache"
)

const (
	tailPosts = 1000                  // the other posts, read uniformly
	readEvery = 10 * time.Millisecond // each instance's pace
	dbLatency = 2 * time.Millisecond  // one database load
	// reportInterval is the fleet loop's: short, so that a few seconds show the whole loop.
	reportInterval = 250 * time.Millisecond
)

// database is the source of truth: posts with versions, and a count of loads.
type database struct {
	mu    sync.Mutex
	posts map[string]uint64 // key -> version
	loads sync.Map          // key -> *atomic.Int64
	total atomic.Int64
}

func (d *database) load(_ context.Context, key string) (celebrity.Versioned[string], error) {
	time.Sleep(dbLatency)
	n, _ := d.loads.LoadOrStore(key, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	d.total.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.posts[key]
	if !ok {
		return celebrity.Versioned[string]{}, celebrity.ErrNotFound
	}
	return celebrity.Versioned[string]{Value: fmt.Sprintf("%s@v%d", key, v), Version: v}, nil
}

func (d *database) update(key string) (string, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.posts[key]++
	return fmt.Sprintf("%s@v%d", key, d.posts[key]), d.posts[key]
}

func (d *database) loadsOf(key string) int64 {
	if n, ok := d.loads.Load(key); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// valid reports whether v is a value key held at some version up to the current one.
func (d *database) valid(key, v string) bool {
	var ver uint64
	if _, err := fmt.Sscanf(strings.TrimPrefix(v, key), "@v%d", &ver); err != nil || !strings.HasPrefix(v, key+"@") {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return ver >= 1 && ver <= d.posts[key]
}

func main() {
	instances := flag.Int("instances", 0, "simulated service instances (default: 100 on a real Redis, 20 on the embedded one)")
	seconds := flag.Int("seconds", 8, "length of the protected run (it runs on, up to 3 times as long, until the promoted post was measured for 2 s)")
	share := flag.Float64("share", 0.5, "share of reads that go to the viral post")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t, err := redisenv.Connect(ctx, redisenv.Options{EmbeddedServers: 3})
	if err != nil {
		fmt.Fprintln(os.Stderr, "celebrity:", err)
		os.Exit(2)
	}
	defer t.Close()
	if *instances <= 0 {
		*instances = 100
		if t.Kind == redisenv.Embedded {
			*instances = 20 // the embedded servers run scripts in an interpreter, far slower than Redis
		}
	}
	run := fmt.Sprintf("celebrity-example:%d:", time.Now().UnixNano())
	viral := run + "post:ronaldo"
	fmt.Printf("celebrity: a viral post read by %d instances, %.0f%% of reads, for at least %ds\n", *instances, *share*100, *seconds)
	fmt.Printf("running against: %s\n\n", t.Desc)
	pick := func(r *rand.Rand) string {
		if r.Float64() < *share {
			return viral
		}
		return fmt.Sprintf("%spost:%d", run, r.IntN(tailPosts))
	}

	naive := runNaive(ctx, t, *instances, pick, viral)
	var c checker
	s := runProtected(ctx, t, *instances, time.Duration(*seconds)*time.Second, pick, viral, run, &c)
	// The two runs last different times: compare rates over equal reads.
	fmt.Printf("Redis commands per 1,000 reads, per node and in all (data + the loop's own), and skew:\n")
	fmt.Printf("%-10s %-24s %-22s %6s   %s\n", "run", "per node", "all (data + loop)", "skew", "window")
	naive.print("naive", "")
	s.window.print("protected", ", after every instance applied the promotion")
	fmt.Printf("\nnodes: %s\n", strings.Join(t.Masters, ", "))
	if s.promotedAt > 0 {
		fmt.Printf("detected and promoted by the fleet %s after the traffic started, at %.0f Redis-level reads/s fleet-wide;\n",
			s.promotedAt.Round(time.Millisecond), s.rate)
		fmt.Printf("applied on all %d instances within %s of the first\n", *instances, s.spread.Round(time.Millisecond))
	}
	fmt.Printf("the whole protected run (warm-up, detection and update included): %d reads, %d Redis commands: %d data, %d the loop's own (%.2f%%)\n",
		s.reads, s.total, s.total-min(s.loopCommands, s.total), s.loopCommands, 100*float64(s.loopCommands)/float64(max(s.total, 1)))
	fmt.Printf("  why so high: the loop costs per instance and interval (reports, polls, the leader's summary reads every %s), not per read, and this toy makes %d reads/s in all; at 100 instances, 6,000 reads/s and 1 s intervals it is 0.54%% (bench/results/closed-loop.txt)\n",
		reportInterval, *instances*int(time.Second/readEvery))
	fmt.Printf("database loads: %d for the viral post, %d in all for %d distinct posts\n", s.viralLoads, s.loads, s.distinct)
	fmt.Printf("fill leases: %d won, %d after waiting for another holder, %d fills refused\n\n", s.leaseWins, s.takeovers, s.fillsRefused)
	if t.Kind == redisenv.Embedded {
		fmt.Println("note: on the embedded default the skew figures are not those of a real cluster: the three")
		fmt.Println("  miniredis servers share this process and its CPU, count every command (connection")
		fmt.Println("  handshakes, pub/sub, scripts) rather than the data commands a real node's commandstats")
		fmt.Println("  report, and are routed by the client without MOVED redirections or replicas; the")
		fmt.Println("  direction (the skew comes down once the post is promoted) holds, the figures do not.")
		fmt.Println("  Set REDIS_CLUSTER_ADDRS to a 3-master Redis Cluster to see real per-node load.")
	}
	if len(t.Masters) > 1 {
		c.check(s.skew < naive.skew, "copies spread the post over the nodes: skew %.2f < %.2f without protection", s.skew, naive.skew)
	} else {
		fmt.Println("note: one node only: skew is 1 by definition and copies spread nothing (replication is off)")
	}
	c.exit()
}

// window is what one measured stretch of traffic cost: Redis commands per node, reads made,
// the loop's own commands among them, and how long it lasted.
type window struct {
	ops   []uint64
	skew  float64
	reads uint64
	loop  uint64
	took  time.Duration
}

// print prints w's commands per 1,000 reads, per node and in all (data and the loop's).
func (w window) print(name, note string) {
	per := func(n uint64) float64 { return 1000 * float64(n) / float64(max(w.reads, 1)) }
	nodes := make([]string, len(w.ops))
	var all uint64
	for i, n := range w.ops {
		nodes[i] = fmt.Sprintf("%.0f", per(n))
		all += n
	}
	loop := min(w.loop, all)
	fmt.Printf("%-10s %-24s %-22s %6.2f   %d reads in %.1fs%s\n", name, strings.Join(nodes, " / "),
		fmt.Sprintf("%.0f (%.0f + %.0f)", per(all), per(all-loop), per(loop)), w.skew, w.reads, w.took.Seconds(), note)
}

// skew returns max/mean of the commands each master executed between two CommandCounts,
// and those commands in the order of masters.
func skew(masters []string, before, after map[string]uint64) (float64, []uint64) {
	d := make([]uint64, len(masters))
	var sum, hi uint64
	for i, a := range masters {
		d[i] = after[a] - before[a]
		sum += d[i]
		hi = max(hi, d[i])
	}
	if sum == 0 {
		return 1, d
	}
	return float64(hi) / (float64(sum) / float64(len(d))), d
}

// runNaive reads every post straight from Redis, for 3 seconds.
func runNaive(ctx context.Context, t *redisenv.Target, n int, pick func(*rand.Rand) string, viral string) window {
	before, _ := t.CommandCounts(ctx)
	var reads atomic.Uint64
	start := time.Now()
	traffic(ctx, n, 3*time.Second, nil, func(i int, r *rand.Rand) {
		_ = t.Client.Get(ctx, pick(r)).Err() // the posts are not even there: a miss costs as much
		reads.Add(1)
	})
	w := window{reads: reads.Load(), took: time.Since(start)}
	after, _ := t.CommandCounts(ctx)
	w.skew, w.ops = skew(t.Masters, before, after)
	return w
}

// traffic runs n instances reading every readEvery for d, and past d for as long as more
// returns true, up to 3d (more may be nil).
func traffic(ctx context.Context, n int, d time.Duration, more func() bool, read func(i int, r *rand.Rand)) {
	start := time.Now()
	running := func() bool {
		switch el := time.Since(start); {
		case ctx.Err() != nil || el >= 3*d:
			return false
		case el < d:
			return true
		default:
			return more != nil && more()
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			tick := time.NewTicker(readEvery)
			defer tick.Stop()
			for running() {
				read(i, r)
				<-tick.C
			}
		})
	}
	wg.Wait()
}

type summary struct {
	window                     // the protected traffic after every instance applied the promotion
	reads               uint64 // in the whole run
	rate                float64
	promotedAt, spread  time.Duration
	viralLoads, loads   int64
	distinct            int
	loopCommands, total uint64
	// leaseWins, takeovers and fillsRefused are the fleet's replicas fill-lease counters.
	leaseWins, takeovers, fillsRefused uint64
}

func runProtected(ctx context.Context, t *redisenv.Target, n int, d time.Duration, pick func(*rand.Rand) string,
	viral, run string, c *checker) summary {
	db := &database{posts: map[string]uint64{viral: 1}}
	for i := range tailPosts {
		db.posts[fmt.Sprintf("%spost:%d", run, i)] = 1
	}
	var mu sync.Mutex
	promoted := map[int]time.Time{}
	var others atomic.Int64
	var rate float64
	caches := make([]*celebrity.Cache[string], n)
	pubsub := l1cache.PubSubAuto
	if t.Kind == redisenv.Embedded {
		pubsub = l1cache.PubSubGlobal // the embedded servers have no sharded pub/sub (SSUBSCRIBE)
	}
	for i := range caches {
		cache, err := celebrity.New(t.Client, db.load, celebrity.Options[string]{
			Prefix: run + "cache:", PubSub: pubsub,
			// Short windows so that a few seconds show the whole loop.
			Fresh: 100 * time.Millisecond,
			Loop: celebrity.LoopOptions{
				ReportInterval: reportInterval, PromoteRate: 2 * float64(n), DemoteRate: float64(n) / 2,
				Hold: 2 * time.Second,
			},

			OnEvent: func(ev celebrity.Event) {
				if ev.Kind != celebrity.EventPromoted {
					return
				}
				if ev.Key != viral {
					others.Add(1)
					return
				}
				mu.Lock()
				promoted[i] = ev.At
				rate = ev.Rate
				mu.Unlock()
			},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "celebrity:", err)
			os.Exit(1)
		}
		defer cache.Close()
		if err := cache.Ready(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "celebrity:", err)
			os.Exit(1)
		}
		caches[i] = cache
	}
	loopCommands := func() (n uint64) {
		for _, c := range caches {
			n += c.Stats().LoopCommands
		}
		return n
	}
	runStart, _ := t.CommandCounts(ctx)
	loopStart := loopCommands()
	var wrong, errs atomic.Int64
	var lastErr atomic.Value
	start := time.Now()
	var before map[string]uint64
	var measuring atomic.Bool
	var measuredFrom atomic.Int64
	var reads, readsFrom, loopFrom atomic.Uint64
	// On a slow machine the promotion may come late: the run goes on until the protected
	// traffic was measured for 2 s (at most 3 times its length).
	more := func() bool {
		from := measuredFrom.Load()
		return from == 0 || time.Since(time.Unix(0, from)) < 2*time.Second
	}
	traffic(ctx, n, d, more, func(i int, r *rand.Rand) {
		key := pick(r)
		v, err := caches[i].Get(ctx, key)
		reads.Add(1)
		switch {
		case err != nil:
			errs.Add(1)
			lastErr.Store(err)
		case !db.valid(key, v):
			wrong.Add(1)
		}
		if i == 0 && !measuring.Load() {
			mu.Lock()
			all := len(promoted) == n
			mu.Unlock()
			if all {
				before, _ = t.CommandCounts(ctx)
				readsFrom.Store(reads.Load())
				loopFrom.Store(loopCommands())
				measuredFrom.Store(time.Now().UnixNano())
				measuring.Store(true)
			}
		}
	})
	after, _ := t.CommandCounts(ctx)
	var s summary
	if before != nil {
		s.window = window{reads: reads.Load() - readsFrom.Load(), loop: loopCommands() - loopFrom.Load(),
			took: time.Since(time.Unix(0, measuredFrom.Load()))}
		s.skew, s.ops = skew(t.Masters, before, after)
	}
	s.reads = reads.Load()
	s.loopCommands = loopCommands() - loopStart

	// An editor updates the viral post: the database first, then Set through one instance.
	val, ver := db.update(viral)
	if err := caches[7%n].Set(ctx, viral, val, ver); err != nil {
		c.check(false, "the update was written: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	reached := 0
	for _, cache := range caches {
		for time.Now().Before(deadline) {
			if v, err := cache.Get(ctx, viral); err == nil && v == val {
				reached++
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	_, all := skew(t.Masters, runStart, after)
	for _, n := range all {
		s.total += n
	}
	mu.Lock()
	var first, last time.Time
	for _, at := range promoted {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	s.rate = rate
	npromoted := len(promoted)
	mu.Unlock()
	s.promotedAt, s.spread = first.Sub(start), last.Sub(first)
	s.viralLoads, s.loads = db.loadsOf(viral), db.total.Load()
	db.loads.Range(func(any, any) bool { s.distinct++; return true })
	for _, cache := range caches {
		st := cache.Stats()
		s.leaseWins += st.Replicas.LeaseWins
		s.takeovers += st.Replicas.LeaseTakeovers
		s.fillsRefused += st.Replicas.FillsRefused
	}

	var le error
	if e, ok := lastErr.Load().(error); ok {
		le = e
	}
	c.check(wrong.Load() == 0 && errs.Load() == 0, "every read returned a version the database held (%d wrong, %d errors%s)",
		wrong.Load(), errs.Load(), errSuffix(le))
	c.check(npromoted == n && others.Load() == 0, "the fleet promoted the viral post on every instance (%d of %d) and nothing else (%d)",
		npromoted, n, others.Load())
	c.check(s.viralLoads == 1 && s.loads == int64(s.distinct),
		"each post reached the database once for the whole fleet (viral %d, all %d for %d posts)", s.viralLoads, s.loads, s.distinct)
	c.check(reached == n, "the editor's update reached every instance (%d of %d)", reached, n)
	c.check(before != nil, "the run lasted past the promotion (measured the protected skew)")
	return s
}

func errSuffix(err error) string {
	if err == nil || errors.Is(err, context.Canceled) {
		return ""
	}
	return "; last: " + err.Error()
}

// checker prints each invariant's verdict and exits non-zero when one broke.
type checker struct{ broken int }

func (c *checker) check(ok bool, format string, args ...any) {
	if ok {
		fmt.Printf("  ok    "+format+"\n", args...)
		return
	}
	fmt.Printf("  FAIL  "+format+"\n", args...)
	c.broken++
}

func (c *checker) exit() {
	if c.broken > 0 {
		fmt.Printf("\ncelebrity: %d invariant(s) broken\n", c.broken)
		os.Exit(1)
	}
	fmt.Println("\ncelebrity: every invariant held")
}
