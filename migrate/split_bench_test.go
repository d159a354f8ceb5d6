package migrate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// BenchmarkSplit measures a split of an overridden tenant (n records) from shard a over four
// shards (b, c, d, a), while the tenant and three neighbours overridden onto a write (each
// at most one write per millisecond, through clients on the old table). One iteration splits
// one new tenant. Metrics: copy rate (the tenant's records/s, start to barrier); the split
// tenant's write pause (barrier to flip) p50/p99, and the longest write it saw per split;
// the neighbours' write latency p99 and max during the splits against the same figures
// outside them in the same run (the reference: target ratio 1, their writes never wait on
// the barrier).
func BenchmarkSplit(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			srv := celebritytest.Shards(b, 5)
			e := newEnvOver(b, srv[0].Client(b), map[string]migrate.ShardClient{"a": srv[1].Client(b), "b": srv[2].Client(b),
				"c": srv[3].Client(b), "d": srv[4].Client(b)}, benchShards)
			neighbours := []string{"bench-n0", "bench-n1", "bench-n2"}
			for _, nb := range neighbours {
				e.override(nb, "a")
				seedTenant(b, e, "a", routing.TenantUnit(nb), nb, 10_000/len(neighbours))
			}
			fats := make([]string, b.N)
			for i := range fats {
				fats[i] = fmt.Sprintf("bench-split%d-%d", n, i)
			}
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
			e.override(fats[0], "a")
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
				if i > 0 {
					e.override(fats[i], "a")
				}
				seedTenant(b, e, "a", routing.TenantUnit(fats[i]), fats[i], n)
				cur.Lock()
				cur.tenant = fats[i]
				cur.Unlock()
				time.Sleep(50 * time.Millisecond) // writes of this tenant before the split
				b.StartTimer()
				st, err := co.Split(context.Background(), migrate.SplitSpec{Tenant: fats[i], Targets: []string{"b", "c", "d", "a"}})
				require.NoError(b, err)
				b.StopTimer()
				time.Sleep(50 * time.Millisecond) // and after it, through the new sub-buckets
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
