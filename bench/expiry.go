package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// expiryModes are the read paths of the mass-expiry run, with what protects the source.
var expiryModes = []struct{ name, strategy, guard string }{
	{"naive", "naive", "nothing: every caller that misses loads"},
	{"singleflight", "L1", "l1cache: one load per key per instance"},
	{"lease", "replicas", "replicas lease: one load per key for the fleet"},
	{"both", "both", "l1cache singleflight, then the replicas lease"},
}

type expiryResult struct {
	mode, guard        string
	reads, errs, wrong int64
	distinct           int
	sourceLoads        int64
	celebLoads         int64
	elapsed            time.Duration
}

// runExpiry reads cfg.expiryKeys hot keys and the celebrity, all missing at the same instant
// (as after a mass expiry, or a cold start), from cfg.expiryReaders concurrent readers on
// each of cfg.expiryInstances instances at once, and counts the source loads.
func runExpiry(ctx context.Context, c *redis.ClusterClient, cfg config, mode string, strategy string) (expiryResult, error) {
	res := expiryResult{mode: mode}
	prefix := fmt.Sprintf("bench:%d:expiry-%s:", time.Now().UnixNano(), mode)
	celeb := prefix + "celebrity"
	src := &source{latency: cfg.expiryLatency, celeb: celeb}
	insts, closeAll, err := newInstances(c, src, cfg.expiryInstances, cfg, strategy, prefix)
	if err != nil {
		return res, err
	}
	defer closeAll()
	var reads, errs, wrong atomic.Int64
	var mu sync.Mutex
	distinct := map[string]bool{}
	startGate := make(chan struct{})
	var wg sync.WaitGroup
	for w := range cfg.expiryInstances * cfg.expiryReaders {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			in := insts[w%len(insts)]
			seen := map[string]bool{}
			<-startGate
			for range cfg.expiryReads {
				key := celeb
				if rng.Float64() >= cfg.share {
					key = fmt.Sprintf("%shot:%d", prefix, rng.IntN(cfg.expiryKeys))
				}
				seen[key] = true
				v, err := in.get(ctx, key)
				reads.Add(1)
				switch {
				case err != nil:
					errs.Add(1)
				case !bytes.Equal(v, value(key)):
					wrong.Add(1)
				}
			}
			mu.Lock()
			for k := range seen {
				distinct[k] = true
			}
			mu.Unlock()
		})
	}
	start := time.Now()
	close(startGate)
	wg.Wait()
	res.elapsed = time.Since(start)
	res.reads, res.errs, res.wrong = reads.Load(), errs.Load(), wrong.Load()
	res.distinct = len(distinct)
	res.sourceLoads, res.celebLoads = src.loads.Load(), src.celebLoads.Load()
	return res, nil
}
