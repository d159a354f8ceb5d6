package migrate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// BenchmarkFold measures a fold-back of a fat overridden tenant (n records in its unit)
// into the bucket it shares with neighbours (10,000 records of theirs), while the fat
// tenant and three neighbours write (each at most one write per millisecond, through
// clients on the old table). One iteration carves out one new (empty) tenant of the bucket,
// fills its unit with n records, then folds it back (only the fold-back is timed). Metrics
// as BenchmarkCarve's: copy rate (records/s, start to barrier); the folded tenant's write
// pause (barrier to flip) p50/p99 and its longest write per fold-back; the neighbours'
// write latency p99 and max during the fold-backs against the same figures outside them in
// the same run (the reference: target ratio 1, their writes never wait on the barrier).
func BenchmarkFold(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			e := newEnv(b, benchShards)
			stay := fmt.Sprintf("bench-fstay-%d", n)
			bu := routing.BucketUnit(routing.BucketOf(stay, testBuckets))
			home := e.openOwner(bu)
			away := other(home)
			neighbours := append([]string{stay}, sameBucket(stay, fmt.Sprintf("bench-fn%d-", n), 2)...)
			for _, nb := range neighbours {
				seedTenant(b, e, home, bu, nb, 10_000/len(neighbours))
			}
			fats := sameBucket(stay, fmt.Sprintf("bench-ffat%d-", n), b.N)
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
			cur.tenant = stay
			wg.Add(1)
			go writer(func() string { cur.Lock(); defer cur.Unlock(); return cur.tenant }, &flat)

			var pauses, fatMax []time.Duration
			var copied int64
			var copyTime time.Duration
			var windows [][2]time.Time
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				_, err := co.Carve(context.Background(), migrate.CarveSpec{Tenant: fats[i], Target: away})
				require.NoError(b, err)
				seedTenant(b, e, away, routing.TenantUnit(fats[i]), fats[i], n)
				cur.Lock()
				cur.tenant = fats[i]
				cur.Unlock()
				time.Sleep(50 * time.Millisecond) // writes of this tenant before the fold-back
				b.StartTimer()
				st, err := co.Fold(context.Background(), migrate.FoldSpec{Tenant: fats[i]})
				require.NoError(b, err)
				b.StopTimer()
				time.Sleep(50 * time.Millisecond) // and after it, in the bucket
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
