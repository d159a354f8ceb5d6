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

// BenchmarkMerge measures a merge of a tenant spread over four shards (n records, split
// from an override on a before the timer runs) back into its override unit on b, while the
// tenant writes (at most one write per millisecond, through a client on the table of its
// start). One iteration merges one new tenant. Metrics: copy rate (the tenant's records/s,
// start to barrier), the tenant's write pause (barrier to flip) p50/p99, and the longest
// write it saw per merge (p50), as BenchmarkSplit reports them for the split.
func BenchmarkMerge(b *testing.B) {
	for _, n := range []int{10_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			srv := celebritytest.Shards(b, 5)
			e := newEnvOver(b, srv[0].Client(b), map[string]migrate.ShardClient{"a": srv[1].Client(b), "b": srv[2].Client(b),
				"c": srv[3].Client(b), "d": srv[4].Client(b)}, benchShards)
			co := e.coordinator(migrate.Options{BatchSize: 1000})
			var flat latencies
			var cur struct {
				sync.Mutex
				tenant string
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := e.client()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					cur.Lock()
					tenant := cur.tenant
					cur.Unlock()
					start := time.Now()
					if tenant != "" {
						_, _, err := cl.tdo(context.Background(), tenant, fmt.Sprintf("bw-%d-%d", start.UnixNano(), i),
							routing.Put(fmt.Sprintf("r%d", i%5000), "w"))
						if err == nil {
							flat.add(start, time.Since(start))
						}
					}
					time.Sleep(time.Millisecond)
				}
			}()
			var pauses, fatMax []time.Duration
			var copied int64
			var copyTime time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				fat := fmt.Sprintf("bench-merge%d-%d", n, i)
				e.override(fat, "a")
				seedTenant(b, e, "a", routing.TenantUnit(fat), fat, n)
				_, err := co.Split(context.Background(), migrate.SplitSpec{Tenant: fat, Targets: []string{"b", "c", "d", "a"}})
				require.NoError(b, err)
				cur.Lock()
				cur.tenant = fat
				cur.Unlock()
				time.Sleep(50 * time.Millisecond) // writes of this tenant before the merge
				b.StartTimer()
				st, err := co.Merge(context.Background(), migrate.MergeSpec{Tenant: fat, Target: "b"})
				require.NoError(b, err)
				b.StopTimer()
				time.Sleep(50 * time.Millisecond) // and after it, through the unit
				b.StartTimer()
				pauses = append(pauses, st.Pause)
				copied += st.Copied
				copyTime += st.ClosedAt.Sub(st.Created)
				in, _ := flat.during(st.ClosedAt, st.Flipped)
				fatMax = append(fatMax, pct(append(in, 0), 1))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			b.ReportMetric(float64(copied)/copyTime.Seconds(), "copied/s")
			b.ReportMetric(ms(pct(pauses, 0.5)), "fat-pause-p50-ms")
			b.ReportMetric(ms(pct(pauses, 0.99)), "fat-pause-p99-ms")
			b.ReportMetric(ms(pct(fatMax, 0.5)), "fat-longest-write-p50-ms")
		})
	}
}
