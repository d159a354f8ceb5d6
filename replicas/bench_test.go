package replicas_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/replicas"
)

// BenchmarkHotKeyRead reads one hot key on the 3-master cluster: the reference is a plain
// GET of the key; the others read through N copies. Each reports the per-master skew of GET
// commands (max/mean, from INFO commandstats); throughput is ns/op (compare the lines).
func BenchmarkHotKeyRead(b *testing.B) {
	c := celebritytest.SharedCluster(b)
	client := c.Client(b, func(o *redis.ClusterOptions) { o.PoolSize = 64 })
	ctx := context.Background()
	key := celebritytest.Prefix(b) + "post:ronaldo"
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
			hot := celebritytest.Prefix(b) + "post:ronaldo"
			r := newReplicator(b, client, replicas.Options{Copies: n, Hot: []string{hot}})
			require.NoError(b, r.Set(ctx, hot, []byte("replicated"), 1, time.Hour))
			run(b, func() error { _, err := r.Get(ctx, hot); return err })
		})
	}
}

// BenchmarkHotKeyReadInterleaved runs the three readers of BenchmarkHotKeyRead in
// alternating bursts (32 goroutines x 16 reads each per burst), so that load from other
// processes on the machine affects all three alike, and reports throughput relative to the
// plain GET reference (ratio of median burst times) and each reader's per-master skew.
func BenchmarkHotKeyReadInterleaved(b *testing.B) {
	c := celebritytest.SharedCluster(b)
	client := c.Client(b, func(o *redis.ClusterOptions) { o.PoolSize = 64 })
	ctx := context.Background()
	key := celebritytest.Prefix(b) + "post:ronaldo"
	require.NoError(b, client.Set(ctx, key, "plain", time.Hour).Err())
	readers := []func() error{func() error { return client.Get(ctx, key).Err() }}
	for _, n := range []int{3, 6} {
		hot := celebritytest.Prefix(b) + "post:ronaldo:" + strconv.Itoa(n)
		r := newReplicator(b, client, replicas.Options{Copies: n, Hot: []string{hot}})
		require.NoError(b, r.Set(ctx, hot, []byte("replicated"), 1, time.Hour))
		readers = append(readers, func() error { _, err := r.Get(ctx, hot); return err })
	}
	var elapsed [3][]time.Duration
	var calls [3][]float64
	for i := range calls {
		calls[i] = make([]float64, len(c.Addrs()))
	}
	burst := func(read func() error) {
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for range 16 {
					if err := read(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for k := range readers {
			m := (i + k) % len(readers) // rotate the order
			before := getCalls(b, c.Addrs())
			start := time.Now()
			burst(readers[m])
			elapsed[m] = append(elapsed[m], time.Since(start))
			after := getCalls(b, c.Addrs())
			for j := range after {
				calls[m][j] += after[j] - before[j]
			}
		}
	}
	zero := make([]float64, len(c.Addrs()))
	b.ReportMetric(skew(zero, calls[0]), "GET-max/mean")
	b.ReportMetric(skew(zero, calls[1]), "N3-max/mean")
	b.ReportMetric(skew(zero, calls[2]), "N6-max/mean")
	b.ReportMetric(float64(median(elapsed[0]))/float64(median(elapsed[1])), "N3-throughput/GET")
	b.ReportMetric(float64(median(elapsed[0]))/float64(median(elapsed[2])), "N6-throughput/GET")
}

// BenchmarkNotHotGet measures what Get adds over a plain GET for a key that is not hot. The
// two alternate within each iteration (order flipped every time), so machine noise hits both;
// "Get/GET" is the ratio of their median latencies, which outliers from other processes on
// the machine do not move.
func BenchmarkNotHotGet(b *testing.B) {
	c := celebritytest.SharedCluster(b)
	client := c.Client(b)
	ctx := context.Background()
	key := celebritytest.Prefix(b) + "user:1"
	r := newReplicator(b, client, replicas.Options{})
	require.NoError(b, r.Set(ctx, key, []byte("alice"), 1, time.Hour))
	plain := func() error { return client.Get(ctx, key).Err() }
	ours := func() error { _, err := r.Get(ctx, key); return err }
	var tPlain, tOurs []time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		first, second, t1, t2 := plain, ours, &tPlain, &tOurs
		if i%2 == 1 {
			first, second, t1, t2 = ours, plain, &tOurs, &tPlain
		}
		start := time.Now()
		if err := first(); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := second(); err != nil {
			b.Fatal(err)
		}
		*t1 = append(*t1, mid.Sub(start))
		*t2 = append(*t2, time.Since(mid))
	}
	b.ReportMetric(float64(median(tOurs))/float64(median(tPlain)), "Get/GET")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
