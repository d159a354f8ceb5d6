package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity"
)

// tsConfig shapes the closed-loop scenario: a celebrity appears at onset, takes share of the
// reads, and fades at fade; 100 instances each run a celebrity.Cache with its fleet loop.
type tsConfig struct {
	duration, onset, fade time.Duration
	rate                  int // reads per second over the whole fleet
	fresh, interval, hold time.Duration
	promote, demote       float64
	sample                time.Duration
	shards                int // Options.Loop.SummaryShards
	hotEvery              int // Options.Loop.HotReportEvery
	// minShare and earlyShare set ReportMinRate and EarlyReportRate as multiples of an
	// instance's fair share of PromoteRate (PromoteRate divided by the instances).
	minShare, earlyShare float64
	slowEvery            int     // Options.Loop.SlowReportEvery
	promoteShare         float64 // Options.Loop.PromoteShare
}

func defaultTS(cfg config) tsConfig {
	ts := tsConfig{
		duration: 60 * time.Second, onset: 10 * time.Second, fade: 40 * time.Second,
		rate: 6000, fresh: 100 * time.Millisecond, interval: time.Second, hold: 5 * time.Second,
		promote: cfg.tsPromote, demote: cfg.tsPromote / 4, sample: 500 * time.Millisecond, shards: cfg.tsShards,
		hotEvery: 10, minShare: 2, earlyShare: 2, slowEvery: 10, promoteShare: 0.05,
	}
	if cfg.tsDefaults {
		// The library's defaults for every loop option (the zero values, printed as such);
		// the L1's fresh window stays the harness's.
		ts.hold, ts.promote, ts.demote = celebrity.DefaultHold, celebrity.DefaultPromoteRate, celebrity.DefaultPromoteRate/4
		ts.shards, ts.hotEvery, ts.minShare, ts.earlyShare, ts.slowEvery, ts.promoteShare = 0, 0, 0, 0, 0, 0
	}
	return ts
}

// tsSample is the per-node load of one sampling period.
type tsSample struct {
	at    time.Duration // end of the period, since the start
	perS  []float64     // data commands per second, per node
	skew  float64       // max/mean of perS
	celeb bool          // the celebrity was in the traffic during the period
	reads float64       // reads per second the harness made during the period (target: tsConfig.rate)
	// spread is how far apart the masters' counters were read at the end of the period.
	spread time.Duration
	loop   loopCounts // the fleet loop's counters at the end of the period, summed over the instances
}

// loopCounts are the fleet loop's counters summed over the instances.
type loopCounts struct {
	commands, reports, polls, evaluations, heartbeats uint64
}

func sumLoop(caches []*celebrity.Cache[[]byte]) loopCounts {
	var l loopCounts
	for _, c := range caches {
		if c == nil {
			continue
		}
		st := c.Stats()
		l.commands += st.LoopCommands
		l.reports += st.Reports
		l.polls += st.Polls
		l.evaluations += st.Evaluations
		l.heartbeats += st.Heartbeats
	}
	return l
}

type tsEvent struct {
	key      string
	at       time.Duration
	instance int
	kind     celebrity.EventKind
	rate     float64
	decided  time.Duration // when the fleet decided the change, since the start
}

// crossing is when the celebrity's Redis-level reads over a trailing window first reached
// PromoteRate per second.
type crossing struct {
	window time.Duration
	at     time.Duration
}

type tsResult struct {
	start                  time.Time // the run's t=0
	samples                []tsSample
	events                 []tsEvent
	naiveSkew              float64
	reads, errs, wrong     int64
	loopCommands, total    uint64
	sent                   uint64     // commands the instances sent (client side)
	crossings              []crossing // when the celebrity's Redis-level rate crossed PromoteRate
	reports, evaluations   uint64
	polls, heartbeats      uint64
	loopErrors             uint64
	sentSkew               []float64         // skew of the commands sent, per 1 s window sliding by sample
	byCommand              map[string]uint64 // server-side calls per command (scripts' inner calls included)
	celebLoads, celebFills int64
	flaps, falseHot        int
	otherFlaps, otherDemos int // the tail keys' promotions after the first (per instance and key) and demotions
	others                 map[string]bool
	celeb                  string
	cnt                    *counter
	steps                  *stepCounter
}

// runTimeseries runs the naive baseline, then the closed loop, prints the targets and draws
// the chart.
func runTimeseries(ctx context.Context, c *redis.ClusterClient, nodes []string, cfg config) error {
	ts := defaultTS(cfg)
	z := newZipf(cfg.keys, cfg.alpha)
	prefix := fmt.Sprintf("ts:%d:", time.Now().UnixNano())
	celeb := prefix + "celebrity"
	fmt.Printf("closed loop: %d instances, %d reads/s, Zipf(%.2f) over %d keys; a celebrity at %.0f%% of reads from t=%v to t=%v; "+
		"L1 fresh %v, report interval %v, PromoteRate %.0f/s, DemoteRate %.0f/s, Hold %v, ReportMinRate %.1f/s, EarlyReportRate %.1f/s, HotReportEvery %d, "+
		"SlowReportEvery %d, PromoteShare %.2f (ShareMinRate %.0f/s), poll every %v while the leader's heartbeat is heard\n",
		cfg.instances, ts.rate, cfg.alpha, cfg.keys, cfg.share*100, ts.onset, ts.fade, ts.fresh, ts.interval,
		ts.promote, ts.demote, ts.hold, ts.minShare*ts.promote/float64(cfg.instances),
		ts.earlyShare*ts.promote/float64(cfg.instances), ts.hotEvery, ts.slowEvery, ts.promoteShare, min(2*ts.demote, ts.promote),
		celebrity.DefaultPollIntervals*ts.interval)

	naive, err := tsNaive(ctx, c, nodes, z, cfg, ts, prefix, celeb)
	if err != nil {
		return err
	}
	res, err := tsLoop(ctx, c, nodes, z, cfg, ts, prefix, celeb)
	if err != nil {
		return err
	}
	res.naiveSkew = naive
	printTS(cfg, ts, res)
	if cfg.out != "" {
		if err := writeTSChart(cfg.out, cfg, ts, nodes, res); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		fmt.Printf("\nchart: %s\n", cfg.out)
	}
	if res.errs > 0 || res.wrong > 0 {
		return fmt.Errorf("closed loop: %d errors and %d wrong values in %d reads", res.errs, res.wrong, res.reads)
	}
	return nil
}

// tsPick draws one key: the celebrity with probability share while it is on, else the tail.
func tsPick(r *rand.Rand, z *zipf, share float64, on bool, prefix, celeb string) string {
	if on && r.Float64() < share {
		return celeb
	}
	return fmt.Sprintf("%sk:%d", prefix, z.sample(r))
}

// paced runs fn from n goroutines at rate calls per second in all, until d passes.
func paced(ctx context.Context, n, rate int, d time.Duration, fn func(i int, r *rand.Rand, at time.Duration)) {
	start := time.Now()
	every := time.Duration(float64(time.Second) * float64(n) / float64(rate))
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 99))
			time.Sleep(time.Duration(r.Int64N(int64(every))))
			tick := time.NewTicker(every)
			defer tick.Stop()
			for ctx.Err() == nil {
				at := time.Since(start)
				if at >= d {
					return
				}
				fn(i, r, at)
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
}

// tsNaive measures the skew of the same traffic with the celebrity on, read straight from
// Redis (a miss then costs a fill), for 10 seconds.
func tsNaive(ctx context.Context, c *redis.ClusterClient, nodes []string, z *zipf, cfg config, ts tsConfig,
	prefix, celeb string) (float64, error) {
	before, _, err := nodeOps(ctx, c)
	if err != nil {
		return 0, err
	}
	paced(ctx, cfg.instances, ts.rate, 10*time.Second, func(i int, r *rand.Rand, _ time.Duration) {
		key := tsPick(r, z, cfg.share, true, prefix+"naive:", celeb+":naive")
		if err := c.Get(ctx, key).Err(); err == redis.Nil {
			_ = c.Set(ctx, key, value(key), cfg.ttl).Err()
		}
	})
	after, _, err := nodeOps(ctx, c)
	if err != nil {
		return 0, err
	}
	return skew(deltas(nodes, before, after)), nil
}

func tsLoop(ctx context.Context, c *redis.ClusterClient, nodes []string, z *zipf, cfg config, ts tsConfig,
	prefix, celeb string) (*tsResult, error) {
	res := &tsResult{others: map[string]bool{}}
	cnt := &counter{celeb: celeb, loopPrefix: prefix + "cache:", from: ts.onset + 5*time.Second, to: ts.fade}
	if err := cnt.byNode(ctx, c, nodes, ts.duration+10*time.Second); err != nil {
		return nil, err
	}
	c.AddHook(cnt) // before the instances start: hooks are not added while commands run
	var mu sync.Mutex
	var start time.Time
	var celebLoads atomic.Int64
	load := func(_ context.Context, key string) (celebrity.Versioned[[]byte], error) {
		if key == celeb {
			celebLoads.Add(1)
		}
		time.Sleep(cfg.sourceLatency)
		return celebrity.Versioned[[]byte]{Value: value(key), Version: 1}, nil
	}
	steps := &stepCounter{n: map[string]int{}}
	res.steps = steps
	caches := make([]*celebrity.Cache[[]byte], cfg.instances)
	for i := range caches {
		cache, err := celebrity.New(c, load, celebrity.Options[[]byte]{
			Prefix: prefix + "cache:", MaxEntries: 100_000, Fresh: ts.fresh, TTL: cfg.ttl,
			Loop: celebrity.LoopOptions{
				ReportInterval: ts.interval, PromoteRate: ts.promote, DemoteRate: ts.demote,
				Hold: ts.hold, SummaryShards: ts.shards,
				ReportMinRate:   ts.minShare * ts.promote / float64(cfg.instances),
				EarlyReportRate: ts.earlyShare * ts.promote / float64(cfg.instances),
				HotReportEvery:  ts.hotEvery, SlowReportEvery: ts.slowEvery, PromoteShare: ts.promoteShare,
			},

			Logger: slog.New(steps),
			OnEvent: func(ev celebrity.Event) {
				mu.Lock()
				res.events = append(res.events, tsEvent{key: ev.Key, at: ev.At.Sub(start), instance: i, kind: ev.Kind, rate: ev.Rate, decided: ev.Decided.Sub(start)})
				if ev.Key != celeb && ev.Kind == celebrity.EventPromoted && !res.others[ev.Key] {
					res.others[ev.Key] = true
					res.falseHot++
				}
				mu.Unlock()
			},
		})
		if err != nil {
			return nil, err
		}
		defer cache.Close()
		if err := cache.Ready(ctx); err != nil {
			return nil, err
		}
		caches[i] = cache
	}
	var reads, errs, wrong atomic.Int64
	first, cmds0, err := nodeOps(ctx, c)
	if err != nil {
		return nil, err
	}
	sctx, stopSampler := context.WithCancel(ctx)
	defer stopSampler()
	samples := make(chan []tsSample, 1)
	start = time.Now()
	res.start = start
	cnt.start.Store(start.UnixNano())
	go func() {
		samples <- tsSampler(sctx, c, nodes, ts, start, func() (int64, loopCounts) { return reads.Load(), sumLoop(caches) })
	}()
	paced(ctx, cfg.instances, ts.rate, ts.duration, func(i int, r *rand.Rand, at time.Duration) {
		on := at >= ts.onset && at < ts.fade
		key := tsPick(r, z, cfg.share, on, prefix, celeb)
		v, err := caches[i].Get(ctx, key)
		reads.Add(1)
		switch {
		case err != nil:
			errs.Add(1)
		case string(v) != string(value(key)):
			wrong.Add(1)
		}
	})
	stopSampler()
	res.samples = <-samples
	last, cmds1, err := nodeOps(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, d := range deltas(nodes, first, last) {
		res.total += d
	}
	res.byCommand = map[string]uint64{}
	for k, v := range cmds1 {
		res.byCommand[k] = v - cmds0[k]
	}
	for _, cache := range caches {
		st := cache.Stats()
		res.loopCommands += st.LoopCommands
		res.reports += st.Reports
		res.evaluations += st.Evaluations
		res.polls += st.Polls
		res.heartbeats += st.Heartbeats
		res.loopErrors += st.LoopErrors
	}
	res.sent = cnt.sent.Load()
	for _, w := range []time.Duration{ts.interval / 2, ts.interval} {
		res.crossings = append(res.crossings, crossing{window: w, at: cnt.crossing(ts.onset, w, ts.promote)})
	}
	res.reads, res.errs, res.wrong = reads.Load(), errs.Load(), wrong.Load()
	res.celebLoads = celebLoads.Load()
	res.celebFills = 1 // the celebrity is never written or expired during the run: one fill
	sort.Slice(res.events, func(i, j int) bool { return res.events[i].at < res.events[j].at })
	res.celeb = celeb
	res.cnt = cnt
	res.sentSkew = sentSkews(cnt, res.samples)
	promos := map[int]int{}
	for _, ev := range res.events {
		if ev.kind == celebrity.EventPromoted && ev.key == celeb {
			promos[ev.instance]++
		}
	}
	for _, n := range promos {
		res.flaps += n - 1
	}
	type keyInstance struct {
		key string
		i   int
	}
	others := map[keyInstance]int{}
	for _, ev := range res.events {
		switch {
		case ev.key == celeb:
		case ev.kind == celebrity.EventPromoted:
			others[keyInstance{ev.key, ev.instance}]++
		case ev.kind == celebrity.EventDemoted:
			res.otherDemos++
		}
	}
	for _, n := range others {
		res.otherFlaps += n - 1
	}
	return res, nil
}

// tsSampler reads every master's command counters each sample period. Each master's rate is
// taken over its own interval, between the moments its counters were read: a busy harness
// reads the three masters up to tens of milliseconds apart.
func tsSampler(ctx context.Context, c *redis.ClusterClient, nodes []string, ts tsConfig, start time.Time,
	progress func() (int64, loopCounts)) []tsSample {
	var out []tsSample
	prevAt := time.Since(start)
	prev, _, prevNodeAt, _ := nodeOpsAt(context.Background(), c)
	prevReads, _ := progress()
	tick := time.NewTicker(ts.sample)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		at := time.Since(start) // the counters are read right after
		cur, _, nodeAt, err := nodeOpsAt(context.Background(), c)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sampler:", err)
			continue
		}
		d := deltas(nodes, prev, cur)
		s := tsSample{at: at, perS: make([]float64, len(d))}
		var first, last time.Time
		for i, v := range d {
			s.perS[i] = float64(v) / nodeAt[nodes[i]].Sub(prevNodeAt[nodes[i]]).Seconds()
			if t := nodeAt[nodes[i]]; first.IsZero() || t.Before(first) {
				first = t
			}
			if t := nodeAt[nodes[i]]; t.After(last) {
				last = t
			}
		}
		s.spread = last.Sub(first)
		s.skew = skewF(s.perS)
		s.celeb = at > ts.onset && at-ts.sample < ts.fade
		n, loop := progress()
		s.reads, s.loop = float64(n-prevReads)/(at-prevAt).Seconds(), loop
		out = append(out, s)
		prev, prevAt, prevNodeAt, prevReads = cur, at, nodeAt, n
	}
}

// skewF is skew of rates.
func skewF(xs []float64) float64 {
	var sum, hi float64
	for _, x := range xs {
		sum += x
		hi = max(hi, x)
	}
	if sum == 0 {
		return math.NaN()
	}
	return hi / (sum / float64(len(xs)))
}

func printTS(cfg config, ts tsConfig, r *tsResult) {
	var firstPromo, lastPromo, lastDemo, demoDecided time.Duration
	var promoRate, demoRate float64
	npromo := 0
	for _, ev := range r.events {
		if ev.key != r.celeb {
			continue
		}
		switch ev.kind {
		case celebrity.EventPromoted:
			if npromo == 0 || ev.decided < firstPromo {
				firstPromo, promoRate = ev.decided, ev.rate
			}
			npromo++
			lastPromo = ev.at
		case celebrity.EventDemoted:
			lastDemo, demoRate, demoDecided = ev.at, ev.rate, ev.decided
		}
	}
	// Skew over 1-second windows (2 samples), to smooth the sampling noise.
	serverSkew := func(i int) float64 { return windowSkew(r.samples, i, 2) }
	never := func(int) bool { return false }
	settled := settledAt(r, ts, serverSkew, never)
	fmt.Printf("\nreads %d (errors %d, wrong %d); promotions applied %d on %d instances\n", r.reads, r.errs, r.wrong, npromo, cfg.instances)
	fmt.Printf("%-58s %12s %s\n", "target", "measured", "")
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	// The crossing: the earliest over the trailing windows measured (the strictest reading).
	cross := time.Duration(-1)
	for _, x := range r.crossings {
		fmt.Printf("%-58s %12s\n", fmt.Sprintf("celebrity's Redis-level reads cross %.0f/s over %v", ts.promote, x.window),
			(x.at - ts.onset).Round(time.Millisecond))
		if x.at >= 0 && (cross < 0 || x.at < cross) {
			cross = x.at
		}
	}
	fmt.Printf("%-58s %12s %s\n", "detected (the fleet's decision) after onset", (firstPromo - ts.onset).Round(time.Millisecond),
		fmt.Sprintf("(fleet rate %.0f/s)", promoRate))
	fmt.Printf("%-58s %12s %s\n", "detected after crossing, ≤ 1 s", (firstPromo - cross).Round(time.Millisecond),
		verdict(cross >= 0 && firstPromo-cross <= time.Second))
	fmt.Printf("%-58s %12s %s\n", "promoted on every instance after detection, ≤ 1 s",
		(lastPromo - firstPromo).Round(time.Millisecond), verdict(lastPromo-firstPromo <= time.Second && npromo >= cfg.instances))
	if q := promotionDelays(r); q != nil {
		fmt.Printf("%-58s %12s (min %v, median %v, 90%% %v)\n", "  each instance's promotion after the decision, max", q[3].Round(time.Millisecond),
			q[0].Round(time.Millisecond), q[1].Round(time.Millisecond), q[2].Round(time.Millisecond))
	}
	fmtSettled := func(d time.Duration) string {
		if d < 0 {
			return "never"
		}
		return d.Round(time.Millisecond).String()
	}
	fmt.Printf("%-58s %12s %s (naive skew %.2f)\n", "skew (max/mean, 1 s windows) under 1.2 for good, ≤ 5 s after onset",
		fmtSettled(settled), verdict(settled >= 0 && settled <= 5*time.Second), r.naiveSkew)
	// The same judged on the commands the instances sent per node (windows that line up
	// across nodes), and leaving out the seconds in which the harness made under half its
	// target reads (a stalled harness: a window of a few hundred commands, mostly the
	// background's): what the loop does, apart from the sampler and the machine.
	sent := func(i int) float64 {
		if i < len(r.sentSkew) {
			return r.sentSkew[i]
		}
		return 0
	}
	stalled := func(i int) bool {
		return i > 0 && (r.samples[i].reads+r.samples[i-1].reads)/2 < float64(ts.rate)/2
	}
	nStalled := 0
	for i, s := range r.samples {
		if s.at >= ts.onset && s.at <= ts.fade && i%2 == 1 && stalled(i) {
			nStalled++
		}
	}
	fmt.Printf("%-58s %12s\n", "  the same, stalled seconds left out", fmtSettled(settledAt(r, ts, serverSkew, stalled)))
	fmt.Printf("%-58s %12s\n", "  the same on the commands sent per node", fmtSettled(settledAt(r, ts, sent, never)))
	fmt.Printf("%-58s %12s (%d of the %d seconds onset..fade stalled)\n", "  the same on the commands sent, stalled seconds left out",
		fmtSettled(settledAt(r, ts, sent, stalled)), nStalled, int((ts.fade-ts.onset)/time.Second))
	// Every window that breaks the target after onset+5s, with what the harness did then: a
	// reader can tell the loop's misses from the machine's.
	var over []string
	for i, s := range r.samples {
		if s.at > ts.onset+5*time.Second && s.at <= ts.fade && serverSkew(i) >= 1.2 {
			note := ""
			if stalled(i) {
				note = ", stalled"
			}
			over = append(over, fmt.Sprintf("t=%.1fs %.2f (sent %.2f, %.0f reads/s%s)", s.at.Seconds(), serverSkew(i), sent(i),
				(s.reads+r.samples[max(i-1, 0)].reads)/2, note))
		}
	}
	if len(over) > 0 {
		fmt.Printf("%-58s %12d %s\n", "  windows at or over 1.2 after onset+5s", len(over), strings.Join(over[:min(len(over), 8)], "; "))
	}
	fmt.Printf("%-58s %12s %s\n", fmt.Sprintf("demoted (decided) after fade, ≤ Hold + window = %v", ts.hold+ts.interval),
		(demoDecided - ts.fade).Round(time.Millisecond), verdict(demoDecided > ts.fade && demoDecided-ts.fade <= ts.hold+ts.interval)+
			fmt.Sprintf(" (fleet rate %.1f/s; applied on the last instance %v after fade; the fade fell %v into its report interval)",
				demoRate, (lastDemo-ts.fade).Round(time.Millisecond), time.Duration(r.start.Add(ts.fade).UnixNano()%int64(ts.interval)).Round(time.Millisecond)))
	fmt.Printf("%-58s %12d %s\n", "flaps of the celebrity (promotions after the first, per instance)", r.flaps, verdict(r.flaps == 0))
	fmt.Printf("%-58s %12d (by PromoteRate or PromoteShare; demotions applied %d, promotions after the first per instance %d)\n",
		"tail keys promoted", r.falseHot, r.otherDemos, r.otherFlaps)
	// The target compares like with like: the loop's commands as its instances sent them
	// against every command the instances sent (client side). The server-side count also
	// holds the commands scripts run inside Redis, which the loop's count does not.
	fmt.Printf("%-58s %11.2f%% %s\n", "the loop's own commands, ≤ 1% of the commands sent (target)",
		100*float64(r.loopCommands)/float64(max(r.sent, 1)), verdict(r.loopCommands*100 <= r.sent)+fmt.Sprintf(" (%d of %d)", r.loopCommands, r.sent))
	fmt.Printf("%-58s %11.2f%% %s\n", "  the same against the masters' calls (scripts' inside)",
		100*float64(r.loopCommands)/float64(max(r.total, 1)), fmt.Sprintf("(%d of %d)", r.loopCommands, r.total))
	// The loop's commands follow time, the rest follow the reads: a harness behind its target
	// lowers the denominator only. The projection scales the commands sent to the target
	// read rate (an estimate, not a measurement).
	if r.reads > 0 {
		target := float64(ts.rate) * ts.duration.Seconds()
		projected := float64(r.sent-r.loopCommands)*target/float64(r.reads) + float64(r.loopCommands)
		fmt.Printf("%-58s %11.2f%% (estimate: %d reads made of %.0f)\n", "  projected at the target read rate",
			100*float64(r.loopCommands)/projected, r.reads, target)
	}
	printLoopBreakdown(ts, r)
	fmt.Printf("%-58s %12d (failed steps, over the instances: slow or failed Redis calls)%s\n", "  loop errors", r.loopErrors, r.steps)
	printTimeline(ts, r)
	names := make([]string, 0, len(r.byCommand))
	for k := range r.byCommand {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return r.byCommand[names[i]] > r.byCommand[names[j]] })
	fmt.Printf("%-58s", "  server-side calls by command")
	for _, k := range names {
		fmt.Printf(" %s %d", k, r.byCommand[k])
	}
	fmt.Println()
	printKinds(r)
	fmt.Printf("%-58s %12d %s\n", "source loads of the celebrity per fill (fleet-wide)", r.celebLoads/max(r.celebFills, 1), verdict(r.celebLoads == r.celebFills))
}

// windowSkew is the skew of the summed load of the w samples ending at i.
func windowSkew(s []tsSample, i, w int) float64 {
	sum := make([]uint64, len(s[i].perS))
	for j := max(0, i-w+1); j <= i; j++ {
		for n, v := range s[j].perS {
			sum[n] += uint64(v)
		}
	}
	return skew(sum)
}

// printLoopBreakdown splits the loop's commands by kind, and by phase of the run (before the
// onset, while the celebrity is on, after it faded) from the sampled counters.
func printLoopBreakdown(ts tsConfig, r *tsResult) {
	shards := cmp.Or(ts.shards, celebrity.DefaultSummaryShards)
	summaries := r.evaluations * uint64(shards)
	rest := r.loopCommands - min(r.loopCommands, r.reports+r.polls+summaries+r.heartbeats)
	fmt.Printf("%-58s %12s reports %d, polls (and the leader's lease renewals) %d, summary reads %d (%d evaluations × %d shards), heartbeats %d, hot-set reads, changes and announcements %d\n",
		"  of which", "", r.reports, r.polls, summaries, r.evaluations, shards, r.heartbeats, rest)
	var before, during loopCounts
	for _, s := range r.samples {
		if s.at <= ts.onset {
			before = s.loop
		}
		if s.at <= ts.fade {
			during = s.loop
		}
	}
	fmt.Printf("%-58s %12s before onset %d (reports %d), onset..fade %d (reports %d), after fade %d (reports %d)\n",
		"  by phase (sampled)", "", before.commands, before.reports, during.commands-before.commands, during.reports-before.reports,
		r.loopCommands-during.commands, r.reports-during.reports)
}

// printTimeline prints, per second from the onset until Hold after the fade, the skew of that
// second and the reads per second the harness made against its target: a harness behind its
// target (a loaded machine) shows as a lower rate.
func printTimeline(ts tsConfig, r *tsResult) {
	var lagSum, lagMax float64
	n := 0
	for _, s := range r.samples {
		lag := 1 - s.reads/float64(ts.rate)
		lagSum += lag
		lagMax = max(lagMax, lag)
		n++
	}
	fmt.Printf("%-58s %11.1f%% (mean; worst %.0f ms sample %.1f%%)\n", "harness behind its target read rate",
		100*lagSum/float64(max(n, 1)), float64(ts.sample.Milliseconds()), 100*lagMax)
	fmt.Printf("  t(s)  skew(1s)  sent-skew  reads/s  per-node commands/s\n")
	for i, s := range r.samples {
		if i%2 == 0 || s.at < ts.onset-time.Second || s.at > ts.fade+ts.hold {
			continue
		}
		sent := 0.0
		if i < len(r.sentSkew) {
			sent = r.sentSkew[i]
		}
		fmt.Printf("  %5.1f  %7.2f  %9.2f  %7.0f ", s.at.Seconds(), windowSkew(r.samples, i, 2), sent, (s.reads+r.samples[i-1].reads)/2)
		for n := range s.perS {
			fmt.Printf(" %6.0f", (s.perS[n]+r.samples[i-1].perS[n])/2)
		}
		fmt.Println()
	}
	seen := map[string]bool{}
	for _, ev := range r.events {
		if ev.key == r.celeb || seen[ev.key+ev.kind.String()] {
			continue
		}
		seen[ev.key+ev.kind.String()] = true
		fmt.Printf("  other key %s %s: decided t=%.1fs at fleet rate %.0f/s\n", ev.key, ev.kind, ev.decided.Seconds(), ev.rate)
	}
}

// sentSkews returns, per sample, the skew of the commands the instances sent to each node in
// the second before the sample's end (by the client's own clock, so the nodes' windows line
// up exactly).
func sentSkews(cnt *counter, samples []tsSample) []float64 {
	out := make([]float64, len(samples))
	for i, s := range samples {
		out[i] = skew(cnt.nodeWindow(max(0, s.at-time.Second), s.at))
	}
	return out
}

// settledAt returns how long after the onset the skew of 1 s windows (skewAt of the samples
// from then until the fade) stays under 1.2, or -1. Samples for which skip says so are left
// out of the judgement.
func settledAt(r *tsResult, ts tsConfig, skewAt func(i int) float64, skip func(i int) bool) time.Duration {
	for i, s := range r.samples {
		if s.at < ts.onset || s.at > ts.fade {
			continue
		}
		ok := true
		for j := i; j < len(r.samples) && r.samples[j].at <= ts.fade; j++ {
			if !skip(j) && skewAt(j) >= 1.2 {
				ok = false
				break
			}
		}
		if ok {
			return s.at - ts.onset
		}
	}
	return -1
}

// printKinds prints, per node, the commands the instances sent from 5 s after the onset to
// the fade by kind (the celebrity's keys, the loop's, the tail's), and the tail's heaviest
// keys with their node: where a node's extra load comes from.
func printKinds(r *tsResult) {
	c := r.cnt
	if c == nil || len(c.kinds) == 0 {
		return
	}
	secs := (c.to - c.from).Seconds()
	fmt.Printf("  commands sent per node and second, t=%.0f..%.0fs, by kind (celebrity / loop / tail):", c.from.Seconds(), c.to.Seconds())
	for n := range c.kinds {
		fmt.Printf("  %.0f / %.0f / %.0f", float64(c.kinds[n][kindCeleb].Load())/secs,
			float64(c.kinds[n][kindLoop].Load())/secs, float64(c.kinds[n][kindTail].Load())/secs)
	}
	var celebs, tails []uint64
	for n := range c.kinds {
		celebs = append(celebs, c.kinds[n][kindCeleb].Load())
		tails = append(tails, c.kinds[n][kindTail].Load())
	}
	fmt.Printf("; skew of the celebrity's commands %.2f, of the tail's %.2f\n", skew(celebs), skew(tails))
	c.mu.Lock()
	keys := make([]string, 0, len(c.tailKeys))
	var total uint64
	for k, v := range c.tailKeys {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool { return c.tailKeys[keys[i]] > c.tailKeys[keys[j]] })
	fmt.Printf("  the tail's heaviest keys (commands/s, node):")
	for _, k := range keys[:min(8, len(keys))] {
		fmt.Printf("  %.0f n%d", float64(c.tailKeys[k])/secs, c.owner(k))
	}
	fmt.Printf("  (of %.0f/s over %d keys)\n", float64(total)/secs, len(keys))
	c.mu.Unlock()
}

// stepCounter is a slog.Handler that counts the loop's warnings by step and error ("step: err"
// with the error cut at its first colon-free part), so the run can say which steps failed.
type stepCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *stepCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *stepCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *stepCounter) WithGroup(string) slog.Handler            { return h }
func (h *stepCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	var step, msg string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "step":
			step = a.Value.String()
		case "err":
			msg = a.Value.String()
		}
		return true
	})
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	h.mu.Lock()
	h.n[step+": "+msg]++
	h.mu.Unlock()
	return nil
}

func (h *stepCounter) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.n))
	for k := range h.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " [%s] %d;", k, h.n[k])
	}
	return b.String()
}

// promotionDelays returns the quantiles (min, median, 90%, max) of how long after the fleet's
// decision each instance applied the celebrity's first promotion.
func promotionDelays(r *tsResult) []time.Duration {
	var d []time.Duration
	seen := map[int]bool{}
	for _, ev := range r.events {
		if ev.key == r.celeb && ev.kind == celebrity.EventPromoted && !seen[ev.instance] {
			seen[ev.instance] = true
			d = append(d, ev.at-ev.decided)
		}
	}
	if len(d) == 0 {
		return nil
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	q := func(f float64) time.Duration { return d[min(len(d)-1, int(f*float64(len(d))))] }
	return []time.Duration{d[0], q(0.5), q(0.9), d[len(d)-1]}
}
