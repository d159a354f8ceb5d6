package stripes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkAdd measures Add on the 3-master cluster against the reference a striped counter
// replaces: INCR of one hot key. Compare ns/op of the sub-benchmarks of one run.
//
//	go test -run '^$' -bench Add -benchtime=1s ./stripes/
func BenchmarkAdd(b *testing.B) {
	rc := redistest.SharedCluster(b).Client(b)
	ctx := context.Background()
	b.Run("reference=INCR-one-key", func(b *testing.B) {
		b.ReportAllocs()
		key := redistest.Prefix(b) + "hot"
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := rc.Incr(ctx, key).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("stripes=16/unique-events", func(b *testing.B) {
		b.ReportAllocs()
		c := newCounter(b, rc, Options{Stripes: 16})
		var seq atomic.Int64
		now := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := strconv.FormatInt(seq.Add(1), 36)
				if _, err := c.Add(ctx, Event{ID: id, Time: now}, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("stripes=16/zipf-retries", func(b *testing.B) {
		// Event IDs drawn from a Zipf distribution over 100,000 IDs: most calls are retries
		// of a few hot events (the duplicate path).
		b.ReportAllocs()
		c := newCounter(b, rc, Options{Stripes: 16})
		ids := make([]string, 1<<16)
		z := rand.NewZipf(rand.New(rand.NewPCG(1, 1)), 1.1, 1, 100_000-1)
		for i := range ids {
			ids[i] = fmt.Sprintf("zipf-%d", z.Uint64())
		}
		var seq atomic.Int64
		now := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := ids[int(seq.Add(1))%len(ids)]
				if _, err := c.Add(ctx, Event{ID: id, Time: now}, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkMemoryPerEvent reports the used_memory growth per remembered event over 100,000
// events on a dedicated server, for the counter and for the reference of one key per event
// (SET id 1 EX window NX).
//
//	go test -run '^$' -bench MemoryPerEvent -benchtime=1x ./stripes/
func BenchmarkMemoryPerEvent(b *testing.B) {
	const n = 100_000
	addr := redistest.NewServer(b, redistest.ServerOptions{}).Addr()
	for b.Loop() {
		per := memoryPerEvent(b, addr, Options{Stripes: 16, DedupWindow: 10 * time.Minute}, n)
		b.ReportMetric(per, "B/event")
		ref := referenceKeyPerEvent(b, addr, n)
		b.ReportMetric(ref, "ref-B/event")
		b.ReportMetric(ref/per, "ref/stripes")
	}
}

// referenceKeyPerEvent measures one key with a TTL per event.
func referenceKeyPerEvent(b *testing.B, addr string, n int) float64 {
	ctx := context.Background()
	prefix := redistest.Prefix(b)
	before := usedMemory(b, addr)
	rc := redis.NewClient(&redis.Options{Addr: addr})
	for i := 0; i < n; i += 1000 {
		_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for k := i; k < i+1000 && k < n; k++ {
				p.SetNX(ctx, fmt.Sprintf("%sm-%08d", prefix, k), 1, 10*time.Minute)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	_ = rc.Close()
	return float64(usedMemory(b, addr)-before) / float64(n)
}
