package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

// strategies are the read paths compared, in the order they run.
var strategies = []string{"naive", "L1", "replicas", "both"}

// zipf samples ranks 0..n-1 with P(k) proportional to 1/(k+1)^alpha, for any alpha > 0,
// from a precomputed cumulative distribution.
type zipf struct{ cdf []float64 }

func newZipf(n int, alpha float64) *zipf {
	cdf := make([]float64, n)
	var sum float64
	for k := range n {
		sum += 1 / math.Pow(float64(k+1), alpha)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	return &zipf{cdf: cdf}
}

func (z *zipf) sample(r *rand.Rand) int {
	return min(sort.SearchFloat64s(z.cdf, r.Float64()), len(z.cdf)-1)
}

// source is the database behind the caches: every load takes latency and is counted.
type source struct {
	latency    time.Duration
	celeb      string
	loads      atomic.Int64
	celebLoads atomic.Int64
}

func value(key string) []byte { return []byte("value of " + key) }

func (s *source) load(ctx context.Context, key string) ([]byte, error) {
	s.loads.Add(1)
	if key == s.celeb {
		s.celebLoads.Add(1)
	}
	if s.latency > 0 {
		t := time.NewTimer(s.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return value(key), nil
}

// instance is one simulated service process: its own L1 cache and Replicator, over the
// shared cluster client (as many processes would each hold a client of their own).
type instance struct {
	get   func(ctx context.Context, key string) ([]byte, error)
	cache *l1cache.Cache[[]byte]
	rep   *replicas.Replicator
}

type pathOptions struct {
	strategy string
	hot      []string // keys the replicas path replicates from the start
	ttl      time.Duration
	l1Fresh  time.Duration
	prefix   string
}

func newInstance(c *redis.ClusterClient, src *source, o pathOptions) (*instance, error) {
	in := &instance{}
	in.get = func(ctx context.Context, key string) ([]byte, error) {
		v, err := c.Get(ctx, key).Bytes()
		if err == nil || !errors.Is(err, redis.Nil) {
			return v, err
		}
		if v, err = src.load(ctx, key); err != nil {
			return nil, err
		}
		return v, c.Set(ctx, key, v, o.ttl).Err()
	}
	if o.strategy == "replicas" || o.strategy == "both" {
		r, err := replicas.New(c, replicas.Options{
			Copies: 3, Prefix: o.prefix + "r:", Hot: o.hot, RefreshInterval: -1, DefaultTTL: o.ttl,
		})
		if err != nil {
			return nil, err
		}
		in.rep = r
		in.get = func(ctx context.Context, key string) ([]byte, error) {
			it, err := r.GetOrLoad(ctx, key, o.ttl, func(ctx context.Context, _ string) (replicas.Item, error) {
				v, err := src.load(ctx, key)
				return replicas.Item{Value: v, Version: 1}, err
			})
			return it.Value, err
		}
	}
	if o.strategy == "L1" || o.strategy == "both" {
		next := in.get
		cache, err := l1cache.New(func(ctx context.Context, key string) ([]byte, error) {
			return next(ctx, key)
		}, l1cache.Options[[]byte]{MaxEntries: 10_000, Fresh: o.l1Fresh})
		if err != nil {
			return nil, err
		}
		in.cache = cache
		in.get = cache.Get
	}
	return in, nil
}

func (in *instance) close() {
	if in.cache != nil {
		_ = in.cache.Close()
	}
	if in.rep != nil {
		_ = in.rep.Close()
	}
}

// runResult is one strategy's steady-state run.
type runResult struct {
	strategy    string
	reads       int64
	errs        int64
	wrong       int64
	elapsed     time.Duration
	p50, p99    time.Duration
	perNode     []uint64
	skew        float64
	sourceLoads int64
	celebLoads  int64
	perCommand  map[string]uint64 // commands over all masters, by name
	// lagMean and lagMax are how late reads started after their scheduled moment (open
	// loop: a harness that keeps up starts each read on time).
	lagMean, lagMax time.Duration
	// sent counts, per class of read (classCold: the first read of a key in the sequence;
	// classWarm: every other read), the reads, the commands they sent and their round
	// trips (a pipeline is one), counted by the client hook; unattributed counts commands
	// sent outside any read (none expected).
	sent         [2]tally
	unattributed int64
}

// The classes of reads the harness tells apart.
const (
	classCold = iota // the first read of a key in the sequence (warm-up included)
	classWarm        // a key read before
)

// tally counts one class's reads and what they sent to Redis.
type tally struct{ reads, cmds, trips, scripts int64 }

// sequence is the reads every strategy makes, in order: key ranks (-1: the celebrity) drawn
// from one seeded Zipf, the first warm reads unmeasured, and for each read whether it is the
// first read of its key.
type sequence struct {
	ranks []int32
	first []bool
	warm  int
}

func newSequence(z *zipf, cfg config) *sequence {
	warm := int(float64(cfg.rate) * cfg.warmup.Seconds())
	n := warm + int(float64(cfg.rate)*cfg.duration.Seconds())
	r := rand.New(rand.NewPCG(cfg.seed, 0x5eed))
	s := &sequence{ranks: make([]int32, n), first: make([]bool, n), warm: warm}
	seen := make([]bool, len(z.cdf))
	seenCeleb := false
	for i := range n {
		if r.Float64() < cfg.share {
			s.ranks[i] = -1
			s.first[i] = !seenCeleb
			seenCeleb = true
			continue
		}
		k := z.sample(r)
		s.ranks[i] = int32(k)
		s.first[i] = !seen[k]
		seen[k] = true
	}
	return s
}

// readTally is the per-read record the readCounter hook adds to.
type readTally struct{ cmds, trips, scripts atomic.Int64 }

type tallyKey struct{}

// readCounter is a go-redis hook that adds every command to the readTally in its context
// (carried through l1cache's and replicas' detached loads, which keep the context's values),
// or to unattributed when there is none.
type readCounter struct{ unattributed atomic.Int64 }

func (c *readCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *readCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(ctx, cmd.Name(), 1, isScript(cmd.Name()))
		return next(ctx, cmd)
	}
}

func (c *readCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 {
			scripts := 0
			for _, cmd := range cmds {
				scripts += isScript(cmd.Name())
			}
			c.add(ctx, cmds[0].Name(), len(cmds), scripts)
		}
		return next(ctx, cmds)
	}
}

func (c *readCounter) add(ctx context.Context, name string, n, scripts int) {
	if adminCommands[name] {
		return
	}
	if t, ok := ctx.Value(tallyKey{}).(*readTally); ok {
		t.cmds.Add(int64(n))
		t.trips.Add(1)
		t.scripts.Add(int64(scripts))
		return
	}
	c.unattributed.Add(int64(n))
}

// isScript is 1 for a script call (whose own commands INFO commandstats counts too), else 0.
func isScript(name string) int {
	switch name {
	case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro":
		return 1
	}
	return 0
}

// runStrategy makes the reads of seq through cfg.instances instances of strategy, paced at
// cfg.rate reads per second (open loop, at most cfg.workers in flight), and measures the
// cluster's per-node work over the measured part.
func runStrategy(ctx context.Context, c *redis.ClusterClient, nodes []string, seq *sequence, rc *readCounter, cfg config, strategy string) (runResult, error) {
	res := runResult{strategy: strategy}
	prefix := fmt.Sprintf("bench:%d:%s:", time.Now().UnixNano(), strategy)
	celeb := prefix + "celebrity"
	src := &source{latency: cfg.sourceLatency, celeb: celeb}
	insts, closeAll, err := newInstances(c, src, cfg.instances, cfg, strategy, prefix)
	if err != nil {
		return res, err
	}
	defer closeAll()

	if seq.warm > 0 {
		// Unmeasured: fills Redis (and the caches) with the popular keys, as in a service
		// that has been running; the far tail stays cold, as it would.
		drive(ctx, insts, cfg, seq, 0, seq.warm, prefix, celeb, strategy+" warm-up", nil)
	}
	before, cmds0, err := nodeOps(ctx, c)
	if err != nil {
		return res, err
	}
	loads0, celeb0 := src.loads.Load(), src.celebLoads.Load()
	un0 := rc.unattributed.Load()
	m := &measure{lat: make([][]int64, cfg.workers)}
	start := time.Now()
	drive(ctx, insts, cfg, seq, seq.warm, len(seq.ranks), prefix, celeb, strategy, m)
	res.elapsed = time.Since(start)
	after, cmds1, err := nodeOps(ctx, c)
	if err != nil {
		return res, err
	}
	res.unattributed = rc.unattributed.Load() - un0
	all := slices.Concat(m.lat...)
	slices.Sort(all)
	res.p50 = time.Duration(percentile(all, 0.50))
	res.p99 = time.Duration(percentile(all, 0.99))
	res.reads, res.errs, res.wrong = m.reads.Load(), m.errs.Load(), m.wrong.Load()
	for k := range res.sent {
		res.sent[k] = tally{m.sent[k][0].Load(), m.sent[k][1].Load(), m.sent[k][2].Load(), m.sent[k][3].Load()}
	}
	if res.reads > 0 {
		res.lagMean = time.Duration(m.lagSum.Load() / res.reads)
	}
	res.lagMax = time.Duration(m.lagMax.Load())
	res.perNode = deltas(nodes, before, after)
	res.perCommand = map[string]uint64{}
	for k, v := range cmds1 {
		if d := v - cmds0[k]; d > 0 {
			res.perCommand[k] = d
		}
	}
	res.skew = skew(res.perNode)
	res.sourceLoads, res.celebLoads = src.loads.Load()-loads0, src.celebLoads.Load()-celeb0
	return res, nil
}

// measure collects what the measured reads saw.
type measure struct {
	reads, errs, wrong atomic.Int64
	lagSum, lagMax     atomic.Int64
	sent               [2][4]atomic.Int64 // per class: reads, commands, round trips, script calls
	lat                [][]int64
}

// drive makes reads from..to-1 of seq, read i scheduled at (i-from)/cfg.rate seconds after
// the start and made by instance i mod cfg.instances, with cfg.workers readers taking the
// reads in order; a read whose readers are all busy starts late (the lag, reported). With m
// nil it records nothing.
func drive(ctx context.Context, insts []*instance, cfg config, seq *sequence, from, to int, prefix, celeb, label string, m *measure) {
	every := float64(time.Second) / float64(cfg.rate)
	var next, done atomic.Int64
	next.Store(int64(from))
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.workers {
		wg.Go(func() {
			keyBuf := make([]byte, 0, len(prefix)+16)
			var samples []int64
			if m != nil {
				samples = make([]int64, 0, 1<<12)
			}
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to {
					break
				}
				due := start.Add(time.Duration(float64(i-from) * every))
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
				key := celeb
				if k := seq.ranks[i]; k >= 0 {
					keyBuf = fmt.Appendf(keyBuf[:0], "%sk:%d", prefix, k)
					key = string(keyBuf)
				}
				t := &readTally{}
				rctx := context.WithValue(ctx, tallyKey{}, t)
				t0 := time.Now()
				lag := int64(t0.Sub(due))
				v, err := insts[i%len(insts)].get(rctx, key)
				el := time.Since(t0)
				done.Add(1)
				if m == nil {
					continue
				}
				m.reads.Add(1)
				m.lagSum.Add(lag)
				for {
					old := m.lagMax.Load()
					if lag <= old || m.lagMax.CompareAndSwap(old, lag) {
						break
					}
				}
				cl := classWarm
				if seq.first[i] {
					cl = classCold
				}
				m.sent[cl][0].Add(1)
				m.sent[cl][1].Add(t.cmds.Load())
				m.sent[cl][2].Add(t.trips.Load())
				m.sent[cl][3].Add(t.scripts.Load())
				samples = append(samples, int64(el))
				switch {
				case err != nil:
					m.errs.Add(1)
				case !bytes.Equal(v, value(key)):
					m.wrong.Add(1)
				}
			}
			if m != nil {
				m.lat[w] = samples
			}
		})
	}
	total := time.Duration(float64(to-from) * every)
	stop := progress(ctx, label, total, &done)
	wg.Wait()
	stop()
}

// progress prints the run's progress to stderr every 2s until stop is called.
func progress(ctx context.Context, what string, total time.Duration, reads *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				el := time.Since(start)
				fmt.Fprintf(os.Stderr, "  %-9s %4.0fs / %.0fs  %9d reads  %8.0f reads/s\n", what,
					el.Seconds(), total.Seconds(), reads.Load(), float64(reads.Load())/el.Seconds())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// newInstances builds n simulated instances of one strategy, all treating the celebrity key
// of src as hot, and returns a function that closes them.
func newInstances(c *redis.ClusterClient, src *source, n int, cfg config, strategy, prefix string) ([]*instance, func(), error) {
	insts := make([]*instance, 0, n)
	closeAll := func() {
		for _, in := range insts {
			in.close()
		}
	}
	for range n {
		in, err := newInstance(c, src, pathOptions{
			strategy: strategy, hot: []string{src.celeb}, ttl: cfg.ttl, l1Fresh: cfg.l1Fresh, prefix: prefix,
		})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		insts = append(insts, in)
	}
	return insts, closeAll, nil
}
