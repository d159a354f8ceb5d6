package replicas_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
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
	key := celebritytest.NewPrefix(b) + "post:ronaldo"
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
			hot := celebritytest.NewPrefix(b) + "post:ronaldo"
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
	key := celebritytest.NewPrefix(b) + "post:ronaldo"
	require.NoError(b, client.Set(ctx, key, "plain", time.Hour).Err())
	readers := []func() error{func() error { return client.Get(ctx, key).Err() }}
	for _, n := range []int{3, 6} {
		hot := celebritytest.NewPrefix(b) + "post:ronaldo:" + strconv.Itoa(n)
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
	key := celebritytest.NewPrefix(b) + "user:1"
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

// serverCalls returns the total commands every server has executed (INFO commandstats),
// including the commands scripts run, less INFO and HELLO (its own connection's).
func serverCalls(t testing.TB, addrs []string) float64 {
	t.Helper()
	var total float64
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		info, err := c.Info(context.Background(), "commandstats").Result()
		_ = c.Close()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\n") {
			// The reading connection's own handshake is left out: HELLO, and the CLIENT
			// SETINFO calls go-redis sends on connect (Redis 7.2 and newer run them; 7.0
			// refuses them, so they counted only on newer servers).
			if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") || strings.HasPrefix(line, "cmdstat_hello:") ||
				strings.HasPrefix(line, "cmdstat_client|") {
				continue
			}
			_, rest, _ := strings.Cut(line, "calls=")
			n, _, _ := strings.Cut(rest, ",")
			v, err := strconv.ParseFloat(n, 64)
			require.NoError(t, err)
			total += v
		}
	}
	return total
}

// BenchmarkMissAndHitCost measures what one GetOrLoad costs for a key that is not hot, on a
// miss (the source is asked, the value filled) and on a hit, against the naive reference
// (GET, then SET on a miss) in the same run: client round trips per operation and commands
// the servers executed per operation (scripts' own commands included), as ratios.
func BenchmarkMissAndHitCost(b *testing.B) {
	s := celebritytest.NewServer(b, celebritytest.ServerOptions{})
	count := &counter{}
	client := s.Client(b)
	client.AddHook(count)
	r := newReplicator(b, client, replicas.Options{})
	ctx := context.Background()
	p := celebritytest.NewPrefix(b)
	load := func(context.Context, string) (replicas.Item, error) {
		return replicas.Item{Value: []byte("v"), Version: 1}, nil
	}
	naive := func(key string) error {
		err := client.Get(ctx, key).Err()
		if errors.Is(err, redis.Nil) {
			return client.Set(ctx, key, "v", time.Hour).Err()
		}
		return err
	}
	ours := func(key string) error { _, err := r.GetOrLoad(ctx, key, time.Hour, load); return err }
	for i := range 10 { // scripts loaded, connections open
		require.NoError(b, ours(p+"warm"+strconv.Itoa(i)))
	}
	addrs := []string{s.Addr()}
	measure := func(n int, op func(string) error, key func(int) string) (trips, cmds float64) {
		count.trips.Store(0)
		before := serverCalls(b, addrs)
		for i := range n {
			require.NoError(b, op(key(i)))
		}
		return float64(count.trips.Load()) / float64(n), (serverCalls(b, addrs) - before) / float64(n)
	}
	var nt, nc, ot, oc, nht, nhc, oht, ohc float64
	for i := 0; b.Loop(); i++ {
		round := strconv.Itoa(i)
		naiveKey := func(j int) string { return p + "n" + round + ":" + strconv.Itoa(j) }
		oursKey := func(j int) string { return p + "o" + round + ":" + strconv.Itoa(j) }
		nt, nc = measure(100, naive, naiveKey) // misses
		ot, oc = measure(100, ours, oursKey)
		nht, nhc = measure(100, naive, naiveKey) // hits
		oht, ohc = measure(100, ours, oursKey)
	}
	b.ReportMetric(ot, "miss-trips")
	b.ReportMetric(oc, "miss-cmds")
	b.ReportMetric(oht, "hit-trips")
	b.ReportMetric(ohc, "hit-cmds")
	b.ReportMetric(ot/nt, "miss-trips/naive")
	b.ReportMetric(oc/nc, "miss-cmds/naive")
	b.ReportMetric(oht/nht, "hit-trips/naive")
	b.ReportMetric(ohc/nhc, "hit-cmds/naive")
}
