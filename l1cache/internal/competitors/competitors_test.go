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
	"github.com/redis/rueidis"
	"github.com/viccon/sturdyc"
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

// contender is one cache in front of Redis, simulated as instances independent instances
// (each its own cache and, for the client-side caches, its own connection). get reads the
// hot key through instance i; reads counts the GETs that reached Redis.
type contender struct {
	get   func(ctx context.Context, i int) error
	reads *atomic.Int64
	close func()
}

// contenders builds every cache of the comparison over srv, each reading key, with the
// same freshness: values at most about 1s old (1s TTL, or Fresh 1s and Stale 1s with a
// background refresh for l1cache and sturdyc), except go-redis's client-side cache, which
// has no TTL and relies on server-assisted invalidation only.
func contenders(b *testing.B, srv *celebritytest.Server, key string, n int) map[string]func() contender {
	ctx := context.Background()
	rdb := srv.Client(b)
	return map[string]func() contender{
		"l1cache": func() contender {
			var reads atomic.Int64
			clock := otter.NewCoarseClock(time.Millisecond) // one clock, as one process would share
			caches := make([]*l1cache.Cache[string], n)
			for i := range caches {
				c, err := l1cache.New(func(ctx context.Context, key string) (string, error) {
					reads.Add(1)
					return rdb.Get(ctx, key).Result()
				}, l1cache.Options[string]{MaxEntries: 1000, Fresh: time.Second, Stale: time.Second, Clock: func() time.Time { return time.Unix(0, clock.NowNano()) }})
				if err != nil {
					b.Fatal(err)
				}
				caches[i] = c
			}
			return contender{
				get: func(ctx context.Context, i int) error {
					_, err := caches[i].Get(ctx, key)
					return err
				},
				reads: &reads,
				close: func() {
					for _, c := range caches {
						_ = c.Close()
					}
					clock.Stop()
				},
			}
		},
		"go-redis-cache": func() contender {
			var reads atomic.Int64
			plain := key + ":msgpack" // go-redis/cache stores msgpack
			caches := make([]*cache.Cache, n)
			for i := range caches {
				caches[i] = cache.New(&cache.Options{Redis: countingRedis{rdb, &reads}, LocalCache: cache.NewTinyLFU(1000, time.Second)})
			}
			if err := caches[0].Set(&cache.Item{Ctx: ctx, Key: plain, Value: "payload", SkipLocalCache: true}); err != nil {
				b.Fatal(err)
			}
			return contender{
				get: func(ctx context.Context, i int) error {
					var v string
					return caches[i].Get(ctx, plain, &v)
				},
				reads: &reads,
				close: func() {},
			}
		},
		"go-redis-csc": func() contender {
			clients := make([]*redis.Client, n)
			for i := range clients {
				clients[i] = redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 3,
					ClientSideCacheConfig: &redis.ClientSideCacheConfig{MaxEntries: 1000}})
			}
			reads := &atomic.Int64{}
			return contender{
				get:   func(ctx context.Context, i int) error { return clients[i].Get(ctx, key).Err() },
				reads: reads,
				close: func() {
					var misses uint64
					for _, c := range clients {
						misses += c.CSCStats().Misses
						_ = c.Close()
					}
					reads.Store(int64(misses))
				},
			}
		},
		"rueidis-csc": func() contender {
			var reads atomic.Int64
			clients := make([]rueidis.Client, n)
			for i := range clients {
				c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableRetry: true})
				if err != nil {
					b.Fatal(err)
				}
				clients[i] = c
			}
			return contender{
				get: func(ctx context.Context, i int) error {
					c := clients[i]
					resp := c.DoCache(ctx, c.B().Get().Key(key).Cache(), time.Second)
					if !resp.IsCacheHit() {
						reads.Add(1)
					}
					_, err := resp.ToString()
					return err
				},
				reads: &reads,
				close: func() {
					for _, c := range clients {
						c.Close()
					}
				},
			}
		},
		"sturdyc": func() contender {
			var reads atomic.Int64
			caches := make([]*sturdyc.Client[string], n)
			for i := range caches {
				// TTL 2s, refreshed in the background by a hit 0.9..1s after the last fetch
				// (the analogue of l1cache's jittered Fresh and its Stale window); no eviction
				// goroutine, which sturdyc could never stop.
				caches[i] = sturdyc.New[string](1000, 1, 2*time.Second, 10,
					sturdyc.WithNoContinuousEvictions(),
					sturdyc.WithEarlyRefreshes(900*time.Millisecond, time.Second, 2*time.Second, 10*time.Millisecond))
			}
			fetch := func(ctx context.Context) (string, error) {
				reads.Add(1)
				return rdb.Get(ctx, key).Result()
			}
			return contender{
				get: func(ctx context.Context, i int) error {
					_, err := caches[i].GetOrFetch(ctx, key, fetch)
					return err
				},
				reads: &reads,
				close: func() {},
			}
		},
	}
}

var order = []string{"l1cache", "go-redis-csc", "rueidis-csc", "sturdyc", "go-redis-cache"}

// BenchmarkHotKeyHit compares a hit of one hot key, already cached, in each cache in the
// same run (one instance each).
func BenchmarkHotKeyHit(b *testing.B) {
	srv := celebritytest.Standalone(b)
	key := celebritytest.NewPrefix(b) + "celebrity"
	ctx := context.Background()
	if err := srv.Client(b).Set(ctx, key, "payload", 0).Err(); err != nil {
		b.Fatal(err)
	}
	all := contenders(b, srv, key, 1)
	for _, name := range order {
		b.Run(name, func(b *testing.B) {
			c := all[name]()
			defer c.close()
			if err := c.get(ctx, 0); err != nil {
				b.Fatal(err)
			}
			before := c.reads.Load()
			parallel(b, 1, func(int) error { return c.get(ctx, 0) })
			if name != "go-redis-csc" && c.reads.Load()-before > int64(b.N)/100 {
				b.Fatalf("%d of %d Gets went to Redis: not a hit benchmark", c.reads.Load()-before, b.N)
			}
		})
	}
}

// BenchmarkHotKeyHundredInstances has 100 simulated instances of each cache read one hot
// key for the benchmark time and reports the Redis reads per instance per second, in the
// steady state (every instance reads the key once before the timer starts). Run it for 5s:
//
//	go test -run '^$' -bench HotKeyHundredInstances -benchtime=5s
func BenchmarkHotKeyHundredInstances(b *testing.B) {
	srv := celebritytest.Standalone(b)
	key := celebritytest.NewPrefix(b) + "celebrity"
	ctx := context.Background()
	if err := srv.Client(b).Set(ctx, key, "payload", 0).Err(); err != nil {
		b.Fatal(err)
	}
	all := contenders(b, srv, key, instances)
	for _, name := range order {
		b.Run(name, func(b *testing.B) {
			c := all[name]()
			for i := range instances {
				if err := c.get(ctx, i); err != nil {
					b.Fatal(err)
				}
			}
			warm := c.reads.Load()
			b.SetParallelism(8)
			start := time.Now()
			parallel(b, instances, func(i int) error { return c.get(ctx, i) })
			secs := time.Since(start).Seconds()
			c.close() // go-redis-csc counts its reads here
			reads := c.reads.Load() - warm
			if name == "go-redis-csc" {
				reads = c.reads.Load() - instances // one miss per instance while warming
			}
			b.ReportMetric(float64(reads)/instances/secs, "redis-reads/instance/s")
		})
	}
}

// parallel calls get b.N times in parallel, cycling over n instances.
func parallel(b *testing.B, n int, get func(instance int) error) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(n)
		for pb.Next() {
			i = (i + 1) % n
			if err := get(i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
}
