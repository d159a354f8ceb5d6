package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/examples/internal/env"
	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

// strategies are run in this order on the same traffic.
var strategies = []string{"naive", "l1", "replicas", "both"}

const (
	otherPosts = 1000                 // the long tail, read with Zipf(1.1)
	dbLatency  = 3 * time.Millisecond // one source load
	postTTL    = 5 * time.Minute      // every key the example writes expires
	evalEvery  = 10                   // an instance evaluates its detector every so many reads
	l1Fresh    = 30 * time.Second     // longer than a run: the cache never reloads
	readLimit  = 10 * time.Second     // one read
)

type scenario struct {
	t         *env.Target
	instances int
	reads     int
	share     float64
	run       string // key prefix of this process's run
}

type result struct {
	strategy                      string
	instances                     int64
	redisOps                      uint64
	perNode                       []uint64
	skew                          float64
	viralLoads, sourceLoads       int64
	distinct, perInstanceDistinct int64
	l1Hits, l1Loads               uint64
	wrong, errs                   int64
	detected, falseHot            int64
	view                          string
	elapsed                       time.Duration
}

// source is the database behind the cache: it counts loads and takes dbLatency each.
type source struct {
	prefix      string
	viral       string
	loads       atomic.Int64
	viralLoads  atomic.Int64
	mu          sync.Mutex
	distinctSet map[string]bool
}

func (s *source) value(key string) []byte { return []byte("body of " + key) }

func (s *source) load(ctx context.Context, key string) ([]byte, error) {
	s.loads.Add(1)
	if key == s.viral {
		s.viralLoads.Add(1)
	}
	select {
	case <-time.After(dbLatency):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.value(key), nil
}

func (sc *scenario) runStrategy(ctx context.Context, strategy string) (result, error) {
	prefix := sc.run + strategy + ":"
	src := &source{prefix: prefix, viral: prefix + "post:viral", distinctSet: map[string]bool{}}
	res := result{strategy: strategy, instances: int64(sc.instances)}

	before, err := sc.t.NodeOps(ctx)
	if err != nil {
		return res, err
	}
	insts := make([]*instance, sc.instances)
	for i := range insts {
		in, err := newInstance(ctx, sc.t, strategy, prefix, src)
		if err != nil {
			return res, err
		}
		insts[i] = in
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	began := time.Now()
	for i, in := range insts {
		wg.Go(func() {
			<-start
			in.serve(ctx, sc, uint64(i), src, &res)
		})
	}
	close(start)
	wg.Wait()
	res.elapsed = time.Since(began)

	for i, in := range insts {
		if i == 0 {
			res.view = in.describe(src.viral, prefix)
		}
		in.close(&res)
	}
	after, err := sc.t.NodeOps(ctx)
	if err != nil {
		return res, err
	}
	res.skew, res.perNode = sc.t.Skew(before, after)
	for _, v := range res.perNode {
		res.redisOps += v
	}
	res.viralLoads, res.sourceLoads = src.viralLoads.Load(), src.loads.Load()
	res.distinct = int64(len(src.distinctSet))
	return res, nil
}

// instance is one process of the service: its read path depends on the strategy.
type instance struct {
	get      func(ctx context.Context, key string) ([]byte, error)
	det      *hotkeys.Detector
	cache    *l1cache.Cache[[]byte]
	rep      *replicas.Replicator
	viralHot atomic.Bool
	otherHot atomic.Int64
	promoErr atomic.Value
}

func newInstance(ctx context.Context, t *env.Target, strategy, prefix string, src *source) (*instance, error) {
	in := &instance{}
	// naive: Redis, and the source on a miss (every instance that misses loads).
	naive := func(ctx context.Context, key string) ([]byte, error) {
		v, err := t.Client.Get(ctx, key).Bytes()
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, redis.Nil) {
			return nil, err
		}
		v, err = src.load(ctx, key)
		if err != nil {
			return nil, err
		}
		return v, t.Client.Set(ctx, key, v, postTTL).Err()
	}
	in.get = naive
	if strategy == "replicas" || strategy == "both" {
		r, err := replicas.New(t.Client, replicas.Options{
			Copies: 3, Prefix: prefix + "r:", RefreshInterval: -1, DefaultTTL: postTTL,
		})
		if err != nil {
			return nil, err
		}
		in.rep = r
		in.get = func(ctx context.Context, key string) ([]byte, error) {
			it, err := r.GetOrLoad(ctx, key, postTTL, func(ctx context.Context) (replicas.Item, error) {
				v, err := src.load(ctx, key)
				return replicas.Item{Value: v, Version: 1}, err
			})
			return it.Value, err
		}
	}
	if strategy == "l1" || strategy == "both" {
		next := in.get
		c, err := l1cache.New(func(ctx context.Context, key string) ([]byte, error) {
			return next(ctx, key)
		}, l1cache.Options[[]byte]{MaxEntries: 100_000, Fresh: l1Fresh})
		if err != nil {
			return nil, err
		}
		in.cache = c
		in.get = c.Get
	}
	o := hotkeys.Options{
		SampleRate: 1, HotShare: 0.2, MinSamples: 20, EvalInterval: -1, Window: 10 * time.Second,
		OnHot: func(e hotkeys.KeyEvent) {
			if e.Key != src.viral {
				in.otherHot.Add(1)
				return
			}
			in.viralHot.Store(true)
			if in.rep != nil {
				// From now on this instance reads the post from its copies.
				if err := in.rep.Promote(context.WithoutCancel(ctx), e.Key); err != nil {
					in.promoErr.Store(err)
				}
			}
		},
	}
	if c := t.Cluster(); c != nil {
		cs, err := hotkeys.NewClusterShards(ctx, c)
		if err != nil {
			return nil, err
		}
		o.Shard, o.AllShards = cs.Shard, cs.Masters
	} else {
		addr := t.Masters()[0]
		o.Shard = func(string) string { return addr }
	}
	d, err := hotkeys.New(o)
	if err != nil {
		return nil, err
	}
	in.det = d
	return in, nil
}

// serve runs one instance's reads: Observe, read through the strategy's path, verify.
func (in *instance) serve(ctx context.Context, sc *scenario, id uint64, src *source, res *result) {
	rng := rand.New(rand.NewPCG(id, 42))
	zipf := rand.NewZipf(rng, 1.1, 1, otherPosts-1)
	seen := map[string]bool{}
	for n := 1; n <= sc.reads; n++ {
		key := src.viral
		if rng.Float64() >= sc.share {
			key = fmt.Sprintf("%spost:%d", src.prefix, zipf.Uint64())
		}
		if !seen[key] {
			seen[key] = true
			src.mu.Lock()
			src.distinctSet[key] = true
			src.mu.Unlock()
		}
		in.det.Observe(key)
		rctx, cancel := context.WithTimeout(ctx, readLimit)
		v, err := in.get(rctx, key)
		cancel()
		switch {
		case err != nil:
			if atomic.AddInt64(&res.errs, 1) <= 3 {
				fmt.Printf("  error: %s %s: %v\n", res.strategy, key, err)
			}
		case !bytes.Equal(v, src.value(key)):
			atomic.AddInt64(&res.wrong, 1)
		}
		if n%evalEvery == 0 {
			in.det.Evaluate()
		}
	}
	atomic.AddInt64(&res.perInstanceDistinct, int64(len(seen)))
}

// describe is what instance 0's detector saw.
func (in *instance) describe(viral, prefix string) string {
	top, _ := in.det.Top(1)
	v, err := in.det.ShardView()
	if len(top) == 0 || err != nil {
		return ""
	}
	name := top[0].Key[len(prefix):]
	return fmt.Sprintf("top key %s at %.0f%% of its reads, client-side shard skew %.2f",
		name, top[0].Share*100, v.Skew)
}

func (in *instance) close(res *result) {
	if in.viralHot.Load() {
		res.detected++
	}
	res.falseHot += in.otherHot.Load()
	if err, _ := in.promoErr.Load().(error); err != nil {
		res.errs++
	}
	if in.cache != nil {
		st := in.cache.Stats()
		res.l1Hits += st.Hits + st.StaleHits
		res.l1Loads += st.Loads
		_ = in.cache.Close()
	}
	if in.rep != nil {
		_ = in.rep.Close()
	}
	_ = in.det.Close()
}
