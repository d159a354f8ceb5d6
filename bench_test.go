package celebrity_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/l1cache"
)

const benchKeys = 1 << 12

// zipfKeys returns n keys drawn from a Zipf distribution (s=1.01) over benchKeys keys.
func zipfKeys(prefix string, n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.01, 1, benchKeys-1)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint(prefix, "key:", z.Uint64())
	}
	return keys
}

// BenchmarkGetHit compares a fresh hit of Cache.Get with a fresh hit of a bare l1cache.Cache
// (the reference) in the same run, over Zipf-distributed keys and over one hot key. The
// Cache's hit is the L1's hit plus a key check and a pointer dereference. Run with -cpu=1,2.
func BenchmarkGetHit(b *testing.B) {
	srv := celebritytest.Standalone(b)
	p := celebritytest.NewPrefix(b)
	workloads := map[string][]string{"zipf": zipfKeys(p, 1<<16), "hotkey": {p + "celebrity"}}
	for _, name := range []string{"zipf", "hotkey"} {
		keys := workloads[name]
		b.Run(name+"/l1cache", func(b *testing.B) {
			c, err := l1cache.New(func(ctx context.Context, key string) (string, error) { return key, nil },
				l1cache.Options[string]{MaxEntries: 2 * benchKeys, Fresh: time.Hour, Beta: l1cache.RecommendedBeta})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for _, k := range keys {
				c.Set(k, k)
			}
			ctx := context.Background()
			benchParallel(b, keys, func(k string) bool {
				_, err := c.Get(ctx, k)
				return err == nil
			})
		})
		b.Run(name+"/celebrity", func(b *testing.B) {
			c, err := celebrity.New(srv.Client(b), func(ctx context.Context, key string) (celebrity.Versioned[string], error) {
				return celebrity.Versioned[string]{Value: key, Version: 1}, nil
			}, celebrity.Options[string]{Prefix: p, MaxEntries: 2 * benchKeys, Fresh: time.Hour, ReportInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			if err := c.Ready(ctx); err != nil {
				b.Fatal(err)
			}
			for _, k := range keys {
				if _, err := c.Get(ctx, k); err != nil {
					b.Fatal(err)
				}
			}
			loads := c.Stats().L1.Loads
			benchParallel(b, keys, func(k string) bool {
				_, err := c.Get(ctx, k)
				return err == nil
			})
			if s := c.Stats().L1; s.Loads != loads || s.Hits == 0 {
				b.Fatalf("not a hit benchmark: %+v", s)
			}
		})
	}
}

// benchParallel calls get on keys in parallel, b.N times in all. Besides the wall time per
// call it reports the process's CPU time per call (cpu-ns/op, summed over the cores): on a
// machine shared with other processes, a core taken away lengthens the wall time of a
// parallel run but not the CPU time its calls cost, while cache lines bouncing between cores
// lengthen both.
func benchParallel(b *testing.B, keys []string, get func(string) bool) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU(b)
	b.RunParallel(func(shared *testing.PB) {
		// Each goroutine counts its iterations in a copy of its PB on its own stack: the PB
		// itself is a small heap object, written by every Next, that can share a cache line
		// with the other goroutines' PBs, which would make every iteration pay for a line
		// bouncing between cores whatever the cache measured.
		pb := *shared
		i := rand.IntN(len(keys))
		for pb.Next() {
			if !get(keys[i&(len(keys)-1)]) {
				panic("miss")
			}
			i++
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU returns the CPU time the process has used, user and system, in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
