package migrate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// seedTenant fills tenant's part of bucket unit u on shard name with n records.
func seedTenant(b *testing.B, e *env, name string, u routing.Unit, tenant string, n int) {
	c := e.clients[name].(redis.Cmdable)
	k := routingfmt.Keys(e.shards[name].Keys().Tag(u))
	for i := 0; i < n; i += 1000 {
		vals := make([]any, 0, 2000)
		for j := i; j < min(i+1000, n); j++ {
			vals = append(vals, routingfmt.RecordField(tenant, fmt.Sprintf("r%d", j)), "1:l:"+fmt.Sprintf("value-%d", j))
		}
		require.NoError(b, c.HSet(context.Background(), k.Records, vals...).Err())
	}
}

// latencies records write latencies by the time the write started.
type latencies struct {
	mu sync.Mutex
	at []time.Time
	d  []time.Duration
}

func (l *latencies) add(at time.Time, d time.Duration) {
	l.mu.Lock()
	l.at, l.d = append(l.at, at), append(l.d, d)
	l.mu.Unlock()
}

// during returns the latencies of writes that overlapped [from, to], and of the others.
func (l *latencies) during(from, to time.Time) (in, out []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, at := range l.at {
		if at.Before(to) && at.Add(l.d[i]).After(from) {
			in = append(in, l.d[i])
		} else {
			out = append(out, l.d[i])
		}
	}
	return in, out
}

// BenchmarkCarve measures a carve-out of a fat tenant (n records) out of a bucket it shares
// with neighbours (10,000 records of theirs), while the fat tenant and three neighbours write
// (each at most one write per millisecond, through clients on the old table). One iteration
// carves one new fat tenant of the same bucket. Metrics: copy rate (the tenant's records/s,
// start to barrier); the carved tenant's write pause (barrier to flip) p50/p99, and the
// longest write it saw per carve-out; the neighbours' write latency p99 and max during the
// carve-outs against the same figures outside them in the same run (the reference: target
// ratio 1, their writes never wait on the barrier).
func BenchmarkCarve(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			e := newEnv(b, benchShards)
			stay := fmt.Sprintf("bench-stay-%d", n)
			bu := routing.BucketUnit(routing.BucketOf(stay, testBuckets))
			src := e.openOwner(bu)
			dst := other(src)
			neighbours := append([]string{stay}, sameBucket(stay, fmt.Sprintf("bench-n%d-", n), 2)...)
			for _, nb := range neighbours {
				seedTenant(b, e, src, bu, nb, 10_000/len(neighbours))
			}
			fats := sameBucket(stay, fmt.Sprintf("bench-fat%d-", n), b.N)
			co := e.coordinator(migrate.Options{BatchSize: 1000})
			var nlat, flat latencies
			stop := make(chan struct{})
			var wg sync.WaitGroup
			writer := func(tenant func() string, lat *latencies) {
				defer wg.Done()
				cl := e.client()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					_, _, err := cl.tdo(context.Background(), tenant(), fmt.Sprintf("bw-%d-%d", start.UnixNano(), i),
						routing.Put(fmt.Sprintf("r%d", i%5000), "w"))
					if err == nil {
						lat.add(start, time.Since(start))
					}
					time.Sleep(time.Millisecond)
				}
			}
			for _, nb := range neighbours {
				wg.Add(1)
				go writer(func() string { return nb }, &nlat)
			}
			var cur struct {
				sync.Mutex
				tenant string
			}
			cur.tenant = fats[0]
			wg.Add(1)
			go writer(func() string { cur.Lock(); defer cur.Unlock(); return cur.tenant }, &flat)

			var pauses, fatMax []time.Duration
			var copied int64
			var copyTime time.Duration
			var windows [][2]time.Time
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				seedTenant(b, e, src, bu, fats[i], n)
				cur.Lock()
				cur.tenant = fats[i]
				cur.Unlock()
				time.Sleep(50 * time.Millisecond) // writes of this tenant before the carve-out
				b.StartTimer()
				st, err := co.Carve(context.Background(), migrate.CarveSpec{Tenant: fats[i], Target: dst})
				require.NoError(b, err)
				b.StopTimer()
				time.Sleep(50 * time.Millisecond) // and after it, through the new owner
				b.StartTimer()
				pauses = append(pauses, st.Pause)
				copied += st.Copied
				copyTime += st.ClosedAt.Sub(st.Created)
				windows = append(windows, [2]time.Time{st.Created, st.Flipped})
				in, _ := flat.during(st.ClosedAt, st.Flipped)
				fatMax = append(fatMax, pct(append(in, 0), 1))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			var nin []time.Duration
			for _, w := range windows {
				in, _ := nlat.during(w[0], w[1])
				nin = append(nin, in...)
			}
			nout := outside(&nlat, windows)
			b.ReportMetric(float64(copied)/copyTime.Seconds(), "copied/s")
			b.ReportMetric(ms(pct(pauses, 0.5)), "fat-pause-p50-ms")
			b.ReportMetric(ms(pct(pauses, 0.99)), "fat-pause-p99-ms")
			b.ReportMetric(ms(pct(fatMax, 0.5)), "fat-longest-write-p50-ms")
			if len(nin) > 0 && len(nout) > 0 {
				b.ReportMetric(ms(pct(nin, 0.99)), "neighbour-p99-during-ms")
				b.ReportMetric(ms(pct(nout, 0.99)), "neighbour-p99-outside-ms")
				b.ReportMetric(ms(pct(nin, 1)), "neighbour-max-during-ms")
				b.ReportMetric(ms(pct(nout, 1)), "neighbour-max-outside-ms")
				b.ReportMetric(float64(pct(nin, 0.99))/float64(pct(nout, 0.99)), "neighbour-p99-ratio")
			}
		})
	}
}

// outside returns the latencies of writes that overlap none of the windows.
func outside(l *latencies, windows [][2]time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for i, at := range l.at {
		end := at.Add(l.d[i])
		overlap := false
		for _, w := range windows {
			if at.Before(w[1]) && end.After(w[0]) {
				overlap = true
				break
			}
		}
		if !overlap {
			out = append(out, l.d[i])
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
