package replicas_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/redistest"
	"github.com/celebrity-go/celebrity/replicas"
)

// BenchmarkHotKeyRead reads one hot key on the 3-master cluster: the reference is a plain
// GET of the key; the others read through N copies. Each reports the per-master skew of GET
// commands (max/mean, from INFO commandstats); throughput is ns/op (compare the lines).
func BenchmarkHotKeyRead(b *testing.B) {
	c := redistest.SharedCluster(b)
	client := c.Client(b, func(o *redis.ClusterOptions) { o.PoolSize = 64 })
	ctx := context.Background()
	key := redistest.Prefix(b) + "post:ronaldo"
	require.NoError(b, client.Set(ctx, key, "plain", time.Hour).Err())

	run := func(b *testing.B, read func() error) {
		b.ReportAllocs()
		before := getCalls(b, c.Addrs())
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := read(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(skew(before, getCalls(b, c.Addrs())), "max/mean")
	}
	b.Run("GET", func(b *testing.B) {
		run(b, func() error { return client.Get(ctx, key).Err() })
	})
	for _, n := range []int{3, 6} {
		b.Run("replicas-N"+strconv.Itoa(n), func(b *testing.B) {
			hot := redistest.Prefix(b) + "post:ronaldo"
			r := newReplicator(b, client, replicas.Options{Copies: n, Hot: []string{hot}})
			require.NoError(b, r.Set(ctx, hot, []byte("replicated"), 1, time.Hour))
			run(b, func() error { _, err := r.Get(ctx, hot); return err })
		})
	}
}

// BenchmarkNotHotGet measures what Get adds over a plain GET for a key that is not hot.
func BenchmarkNotHotGet(b *testing.B) {
	c := redistest.SharedCluster(b)
	client := c.Client(b)
	ctx := context.Background()
	key := redistest.Prefix(b) + "user:1"
	r := newReplicator(b, client, replicas.Options{})
	require.NoError(b, r.Set(ctx, key, []byte("alice"), 1, time.Hour))
	b.Run("GET", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := client.Get(ctx, key).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Get(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	})
}
