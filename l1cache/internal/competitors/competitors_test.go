package competitors

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/go-redis/cache/v9"
	"github.com/maypok86/otter/v2"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { celebritytest.Main(m) }

const instances = 100

// countingRedis counts the GETs go-redis/cache sends to Redis.
type countingRedis struct {
	*redis.Client
	gets *atomic.Int64
}

func (r countingRedis) Get(ctx context.Context, key string) *redis.StringCmd {
	r.gets.Add(1)
	return r.Client.Get(ctx, key)
}

// BenchmarkHotKeyHit compares a hit of one hot key in l1cache and in go-redis/cache (its
// TinyLFU local cache), in the same run.
func BenchmarkHotKeyHit(b *testing.B) {
	rdb := celebritytest.Standalone(b).Client(b)
	key := celebritytest.Prefix(b) + "celebrity"
	ctx := context.Background()
	b.Run("go-redis-cache", func(b *testing.B) {
		var gets atomic.Int64
		c := cache.New(&cache.Options{Redis: countingRedis{rdb, &gets}, LocalCache: cache.NewTinyLFU(1000, time.Hour)})
		if err := c.Set(&cache.Item{Ctx: ctx, Key: key, Value: "payload"}); err != nil {
			b.Fatal(err)
		}
		parallel(b, func(int) error {
			var v string
			return c.Get(ctx, key, &v)
		})
		if gets.Load() != 0 {
			b.Fatalf("%d Gets went to Redis", gets.Load())
		}
	})
	b.Run("l1cache", func(b *testing.B) {
		c, err := l1cache.New(func(ctx context.Context, key string) (string, error) { return "payload", nil },
			l1cache.Options[string]{MaxEntries: 1000, Fresh: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		parallel(b, func(int) error {
			_, err := c.Get(ctx, key)
			return err
		})
	})
}

// BenchmarkHotKeyHundredInstances has 100 simulated instances read one hot key for the
// benchmark time, each through its own go-redis/cache (local TTL 1s) or its own l1cache
// (Fresh 1s, Stale 1s), and reports the Redis reads per instance per second.
func BenchmarkHotKeyHundredInstances(b *testing.B) {
	rdb := celebritytest.Standalone(b).Client(b)
	key := celebritytest.Prefix(b) + "celebrity"
	ctx := context.Background()
	b.Run("go-redis-cache", func(b *testing.B) {
		var gets atomic.Int64
		caches := make([]*cache.Cache, instances)
		for i := range caches {
			caches[i] = cache.New(&cache.Options{Redis: countingRedis{rdb, &gets}, LocalCache: cache.NewTinyLFU(1000, time.Second)})
		}
		if err := caches[0].Set(&cache.Item{Ctx: ctx, Key: key, Value: "payload", SkipLocalCache: true}); err != nil {
			b.Fatal(err)
		}
		report(b, &gets, func(i int) error {
			var v string
			return caches[i].Get(ctx, key, &v)
		})
	})
	b.Run("l1cache", func(b *testing.B) {
		plain := key + ":plain" // go-redis/cache stores msgpack; l1cache reads the raw string
		if err := rdb.Set(ctx, plain, "payload", 0).Err(); err != nil {
			b.Fatal(err)
		}
		clock := otter.NewCoarseClock(time.Millisecond)
		defer clock.Stop()
		var gets atomic.Int64
		caches := make([]*l1cache.Cache[string], instances)
		for i := range caches {
			c, err := l1cache.New(func(ctx context.Context, key string) (string, error) {
				gets.Add(1)
				return rdb.Get(ctx, key).Result()
			}, l1cache.Options[string]{MaxEntries: 1000, Fresh: time.Second, Stale: time.Second, Clock: clock})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			caches[i] = c
		}
		report(b, &gets, func(i int) error {
			_, err := caches[i].Get(ctx, plain)
			return err
		})
	})
}

func parallel(b *testing.B, get func(instance int) error) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(instances)
		for pb.Next() {
			i = (i + 1) % instances
			if err := get(i); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func report(b *testing.B, gets *atomic.Int64, get func(instance int) error) {
	b.SetParallelism(8)
	start := time.Now()
	parallel(b, get)
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(gets.Load())/instances/secs, "redis-reads/instance/s")
}
