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
			it, err := r.GetOrLoad(ctx, key, o.ttl, func(ctx context.Context) (replicas.Item, error) {
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
}

// runStrategy drives cfg.workers goroutines spread over cfg.instances instances for
// cfg.duration and measures the cluster's per-node work.
func runStrategy(ctx context.Context, c *redis.ClusterClient, nodes []string, z *zipf, cfg config, strategy string) (runResult, error) {
	res := runResult{strategy: strategy}
	prefix := fmt.Sprintf("bench:%d:%s:", time.Now().UnixNano(), strategy)
	celeb := prefix + "celebrity"
	src := &source{latency: cfg.sourceLatency, celeb: celeb}
	insts, closeAll, err := newInstances(c, src, cfg.instances, cfg, strategy, prefix)
	if err != nil {
		return res, err
	}
	defer closeAll()

	if cfg.warmup > 0 {
		// Unmeasured: fills Redis (and the caches) with the popular keys, as in a service
		// that has been running; the far tail stays cold, as it would.
		var warm atomic.Int64
		drive(ctx, insts, cfg, z, prefix, celeb, cfg.warmup, strategy+" warm-up", &warm, nil, nil, nil)
	}
	before, cmds0, err := nodeOps(ctx, c)
	if err != nil {
		return res, err
	}
	loads0, celeb0 := src.loads.Load(), src.celebLoads.Load()
	var reads, errs, wrong atomic.Int64
	lat := make([][]int64, cfg.workers)
	start := time.Now()
	drive(ctx, insts, cfg, z, prefix, celeb, cfg.duration, strategy, &reads, &errs, &wrong, lat)
	res.elapsed = time.Since(start)
	after, cmds1, err := nodeOps(ctx, c)
	if err != nil {
		return res, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	res.p50 = time.Duration(percentile(all, 0.50))
	res.p99 = time.Duration(percentile(all, 0.99))
	res.reads, res.errs, res.wrong = reads.Load(), errs.Load(), wrong.Load()
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

// drive runs cfg.workers readers over insts for d. With lat nil it records nothing but the
// read count; otherwise it counts errors and wrong values and keeps every latency.
func drive(ctx context.Context, insts []*instance, cfg config, z *zipf, prefix, celeb string, d time.Duration,
	label string, reads, errs, wrong *atomic.Int64, lat [][]int64) {
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	var wg sync.WaitGroup
	for w := range cfg.workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			in := insts[w%len(insts)]
			keyBuf := make([]byte, 0, len(prefix)+16)
			var samples []int64
			if lat != nil {
				samples = make([]int64, 0, 1<<16)
			}
			for runCtx.Err() == nil {
				key := celeb
				if rng.Float64() >= cfg.share {
					keyBuf = fmt.Appendf(keyBuf[:0], "%sk:%d", prefix, z.sample(rng))
					key = string(keyBuf)
				}
				t0 := time.Now()
				v, err := in.get(runCtx, key)
				el := time.Since(t0)
				if runCtx.Err() != nil {
					break // the run ended during this read: not counted
				}
				reads.Add(1)
				if lat == nil {
					continue
				}
				samples = append(samples, int64(el))
				switch {
				case err != nil:
					errs.Add(1)
				case !bytes.Equal(v, value(key)):
					wrong.Add(1)
				}
			}
			if lat != nil {
				lat[w] = samples
			}
		})
	}
	stop := progress(runCtx, label, d, reads)
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
