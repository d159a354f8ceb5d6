package l1cache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/maypok86/otter/v2"
	"github.com/redis/go-redis/v9"
)

const benchKeys = 1 << 14

// zipfKeys returns n keys drawn from a Zipf distribution (s=1.01) over benchKeys keys.
func zipfKeys(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.01, 1, benchKeys-1)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("key:", z.Uint64())
	}
	return keys
}

// BenchmarkHit compares a fresh hit of the cache with otter v2's raw Get (GetIfPresent) in
// the same run, over Zipf-distributed keys and over one hot key. Run with -cpu=1,2.
//
// There are two references: plain otter, and otter configured as the cache configures its
// store (a coarse clock and an expiry per entry), which is what a host that bounds the age of
// its entries would use. Every cache is bounded to exactly its working set: an otter cache
// less than half full does not record reads for its eviction policy (its frequency sketch is
// not sized yet), a state a bounded cache in service leaves soon after it starts, and a
// reference in that state would measure a cheaper Get than any filled cache does.
func BenchmarkHit(b *testing.B) {
	workloads := map[string][]string{
		"zipf":   zipfKeys(1 << 16),
		"hotkey": {"key:celebrity"},
	}
	for _, name := range []string{"zipf", "hotkey"} {
		keys := workloads[name]
		size := distinct(keys)
		b.Run(name+"/otter", func(b *testing.B) {
			raw := otter.Must(&otter.Options[string, string]{MaximumSize: size})
			benchOtter(b, raw, keys)
		})
		b.Run(name+"/otter-expiry", func(b *testing.B) {
			clock := otter.NewCoarseClock(DefaultClockResolution)
			defer clock.Stop()
			raw := otter.Must(&otter.Options[string, string]{MaximumSize: size, Clock: clock,
				ExpiryCalculator: otter.ExpiryWritingFunc(func(otter.Entry[string, string]) time.Duration { return time.Hour })})
			defer raw.StopAllGoroutines()
			benchOtter(b, raw, keys)
		})
		b.Run(name+"/l1cache", func(b *testing.B) {
			c, err := New(func(ctx context.Context, key string) (string, error) { return key, nil },
				Options[string]{MaxEntries: size, Fresh: time.Hour, Beta: RecommendedBeta})
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
			if s := c.Stats(); s.Loads != 0 || s.Hits == 0 {
				b.Fatalf("not a hit benchmark: %+v", s)
			}
		})
	}
}

// distinct returns the number of distinct keys.
func distinct(keys []string) int {
	set := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		set[k] = struct{}{}
	}
	return len(set)
}

// benchOtter fills raw with keys and measures its hits.
func benchOtter(b *testing.B, raw *otter.Cache[string, string], keys []string) {
	for _, k := range keys {
		raw.Set(k, k)
	}
	raw.CleanUp()
	benchParallel(b, keys, func(k string) bool {
		_, ok := raw.GetIfPresent(k)
		return ok
	})
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

// BenchmarkHitVersusGoRedisCSC compares a hit of one hot key in the cache with a hit in
// go-redis's own client-side cache (RESP3 tracking) over real Redis, in the same run.
func BenchmarkHitVersusGoRedisCSC(b *testing.B) {
	srv := celebritytest.Standalone(b)
	key := celebritytest.NewPrefix(b) + "celebrity"
	ctx := context.Background()
	if err := srv.Client(b).Set(ctx, key, "payload", 0).Err(); err != nil {
		b.Fatal(err)
	}
	b.Run("go-redis-csc", func(b *testing.B) {
		rdb := srv.Client(b, func(o *redis.Options) {
			o.Protocol = 3
			o.ClientSideCacheConfig = &redis.ClientSideCacheConfig{MaxEntries: 2 * benchKeys}
		})
		if err := rdb.Get(ctx, key).Err(); err != nil {
			b.Fatal(err)
		}
		benchParallel(b, []string{key}, func(k string) bool { return rdb.Get(ctx, k).Err() == nil })
		if s := rdb.CSCStats(); s.Hits < uint64(b.N)*99/100 {
			b.Fatalf("go-redis served %d of %d Gets from its cache: %+v", s.Hits, b.N, s)
		}
	})
	b.Run("l1cache", func(b *testing.B) {
		rdb := srv.Client(b)
		c, err := New(func(ctx context.Context, key string) (string, error) { return rdb.Get(ctx, key).Result() },
			Options[string]{MaxEntries: 2 * benchKeys, Fresh: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		benchParallel(b, []string{key}, func(k string) bool {
			_, err := c.Get(ctx, k)
			return err == nil
		})
	})
}
