package l1cache

import (
	"context"
	"testing"
	"time"

	"github.com/maypok86/otter/v2"
	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

const benchKeys = 1 << 14

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
		"zipf":   testkit.ZipfKeys("", 1<<16, benchKeys),
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
			testkit.BenchParallel(b, keys, func(k string) bool {
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
	testkit.BenchParallel(b, keys, func(k string) bool {
		_, ok := raw.GetIfPresent(k)
		return ok
	})
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
		testkit.BenchParallel(b, []string{key}, func(k string) bool { return rdb.Get(ctx, k).Err() == nil })
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
		testkit.BenchParallel(b, []string{key}, func(k string) bool {
			_, err := c.Get(ctx, k)
			return err == nil
		})
	})
}
