package l1cache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/maypok86/otter/v2"
	"github.com/redis/go-redis/v9"
)

const simulatedInstances = 100

// BenchmarkHotKeyHundredInstances has 100 simulated instances read one hot key from real
// Redis as fast as they can, with an L1 cache (Fresh=1s, Stale=1s; XFetch off and on) and
// without one, and reports the Redis reads per instance per second. Run it for 5 s:
//
//	go test -run '^$' -bench HotKeyHundredInstances -benchtime=5s ./l1cache/
func BenchmarkHotKeyHundredInstances(b *testing.B) {
	rdb := celebritytest.Standalone(b).Client(b)
	key := celebritytest.NewPrefix(b) + "celebrity"
	if err := rdb.Set(context.Background(), key, "payload", 0).Err(); err != nil {
		b.Fatal(err)
	}

	for _, beta := range []float64{0, RecommendedBeta} {
		b.Run(fmt.Sprintf("l1-beta=%g", beta), func(b *testing.B) { benchL1(b, rdb, key, beta) })
	}
	b.Run("no-l1", func(b *testing.B) {
		var reads atomic.Int64
		runInstances(b, func(ctx context.Context, _ int) error {
			reads.Add(1)
			return rdb.Get(ctx, key).Err()
		}, &reads)
	})
}

func benchL1(b *testing.B, rdb *redis.Client, key string, beta float64) {
	clock := otter.NewCoarseClock(DefaultClockResolution) // one clock, as one process would share
	defer clock.Stop()
	var reads atomic.Int64
	caches := make([]*Cache[string], simulatedInstances)
	for i := range caches {
		c, err := New(func(ctx context.Context, key string) (string, error) {
			reads.Add(1)
			return rdb.Get(ctx, key).Result()
		}, Options[string]{MaxEntries: 1000, Fresh: time.Second, Stale: time.Second, Beta: beta, Clock: func() time.Time { return time.Unix(0, clock.NowNano()) }})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		caches[i] = c
	}
	// Each instance loads the key once before the measurement: the steady state of a hot
	// key is what is measured, not the cold start (one load per instance per run, which
	// would add 1/seconds to the rate).
	for _, c := range caches {
		if _, err := c.Get(context.Background(), key); err != nil {
			b.Fatal(err)
		}
	}
	reads.Store(0)
	runInstances(b, func(ctx context.Context, instance int) error {
		_, err := caches[instance].Get(ctx, key)
		return err
	}, &reads)
	if testing.Verbose() {
		var sum Stats
		for _, c := range caches {
			s := c.Stats()
			sum.Loads += s.Loads
			sum.Refreshes += s.Refreshes
			sum.EarlyRefreshes += s.EarlyRefreshes
			sum.Misses += s.Misses
			sum.StaleHits += s.StaleHits
			sum.RefreshesSkipped += s.RefreshesSkipped
		}
		b.Logf("N=%d loads=%d refreshes=%d early=%d misses=%d stale-hits=%d skipped=%d", b.N, sum.Loads, sum.Refreshes, sum.EarlyRefreshes, sum.Misses, sum.StaleHits, sum.RefreshesSkipped)
	}
}

// runInstances runs get in parallel b.N times and reports the reads per instance per second.
// Each parallel goroutine cycles through the instances from a random one.
func runInstances(b *testing.B, get func(ctx context.Context, instance int) error, reads *atomic.Int64) {
	b.ReportAllocs()
	b.SetParallelism(8) // Redis round trips leave the CPUs idle otherwise
	ctx := context.Background()
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(simulatedInstances)
		for pb.Next() {
			i = (i + 1) % simulatedInstances
			if err := get(ctx, i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(reads.Load())/simulatedInstances/secs, "redis-reads/instance/s")
	b.ReportMetric(float64(b.N)/simulatedInstances/secs, "gets/instance/s")
}
