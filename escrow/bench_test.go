package escrow

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// spreadPool returns pool options whose n owners' ledgers sit on n different masters of the
// shared cluster (n <= 3), and whose witnesses are off their ledger's master.
func spreadPool(b *testing.B, cl *celebritytest.Cluster, c *redis.ClusterClient, n, capacity int) PoolOptions {
	b.Helper()
	names := []string{"a", "b", "c"}[:n]
	for i := 0; i < 1000; i++ {
		opts := PoolOptions{Name: fmt.Sprint("bench", i), Prefix: celebritytest.NewPrefix(b), Capacity: capacity, Owners: owners(capacity, names...)}
		p, err := NewPool(c, opts)
		if err != nil {
			b.Fatal(err)
		}
		used := map[*celebritytest.Server]bool{}
		ok := true
		for _, o := range names {
			m := cl.MasterOf(p.ledgers[o].keys[0])
			if used[m] || cl.MasterOf(p.WitnessKey(o)) == m {
				ok = false
			}
			used[m] = true
		}
		if ok {
			return opts
		}
	}
	b.Fatal("no spread placement found")
	return PoolOptions{}
}

// roundTrips counts the commands (and pipelines) a client sends: one round trip each.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// countedClient returns a client of the shared cluster whose round trips rt counts.
func countedClient(b *testing.B, cl *celebritytest.Cluster) (*redis.ClusterClient, *roundTrips) {
	c := cl.Client(b)
	rt := &roundTrips{}
	c.AddHook(rt)
	return c, rt
}

// parallelism multiplies GOMAXPROCS for the parallel benchmarks: a hot limit has many
// concurrent callers, mostly waiting on the network.
const parallelism = 16

// BenchmarkAcquireRelease measures acquire+release pairs from parallel callers on the
// 3-master cluster: Central (the reference: one slot, two round trips per pair) against a
// Pool with one owner, and with three owners on three masters, without and with leases
// (four round trips per pair when confirmations arrive in order: witness read, acquire,
// witness confirmation, release; "rt/pair" counts them). The partitioned cases report
// their speed relative to the central one of the same run ("x-central", >1 is faster).
func BenchmarkAcquireRelease(b *testing.B) {
	cl := celebritytest.SharedCluster(b)
	c, rt := countedClient(b, cl)
	const capacity = 10000
	var centralNs float64
	b.Run("central", func(b *testing.B) {
		b.ReportAllocs()
		lim := newTestCentral(b, c, capacity)
		var seq atomic.Int64
		b.SetParallelism(parallelism)
		b.ResetTimer()
		rt.n.Store(0)
		b.RunParallel(func(pb *testing.PB) {
			ctx := testkit.Ctx(b)
			for pb.Next() {
				job := fmt.Sprint("j", seq.Add(1))
				if _, err := lim.Acquire(ctx, job); err != nil {
					b.Error(err)
					return
				}
				if err := lim.Release(ctx, job); err != nil {
					b.Error(err)
					return
				}
			}
		})
		centralNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
		b.ReportMetric(float64(rt.n.Load())/float64(b.N), "rt/pair")
	})
	for _, tc := range []struct {
		n     int
		lease time.Duration
	}{{1, 0}, {3, 0}, {3, time.Minute}} {
		name := fmt.Sprintf("partitioned-%d-masters", tc.n)
		if tc.lease > 0 {
			name += "-lease"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			opts := spreadPool(b, cl, c, tc.n, capacity)
			opts.Lease = tc.lease
			p := newTestPool(b, c, opts)
			var seq, worker atomic.Int64
			b.SetParallelism(parallelism)
			b.ResetTimer()
			rt.n.Store(0)
			b.RunParallel(func(pb *testing.PB) {
				ctx := testkit.Ctx(b)
				owner := p.order[int(worker.Add(1))%len(p.order)]
				for pb.Next() {
					job := fmt.Sprint("j", seq.Add(1))
					if _, err := p.Acquire(ctx, owner, job); err != nil {
						b.Error(err)
						return
					}
					if err := p.Release(ctx, owner, job); err != nil {
						b.Error(err)
						return
					}
				}
			})
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			b.ReportMetric(float64(rt.n.Load())/float64(b.N), "rt/pair")
			if centralNs > 0 {
				b.ReportMetric(centralNs/ns, "x-central")
			}
		})
	}
}

// BenchmarkTransfer10 measures one complete transfer of 10 permits (freeze, deliver,
// complete, with their witness reads and confirmations) between owners on two masters, next
// to one central acquire+release pair run sequentially as the reference ("x-pair" is the
// cost of a transfer in pairs, "rt/op" its round trips).
func BenchmarkTransfer10(b *testing.B) {
	cl := celebritytest.SharedCluster(b)
	c, rt := countedClient(b, cl)
	var pairNs float64
	b.Run("reference-central-pair", func(b *testing.B) {
		b.ReportAllocs()
		ctx := testkit.Ctx(b)
		lim := newTestCentral(b, c, 10)
		b.ResetTimer()
		for i := range b.N {
			job := fmt.Sprint("j", i)
			if _, err := lim.Acquire(ctx, job); err != nil {
				b.Fatal(err)
			}
			if err := lim.Release(ctx, job); err != nil {
				b.Fatal(err)
			}
		}
		pairNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("transfer", func(b *testing.B) {
		b.ReportAllocs()
		ctx := testkit.Ctx(b)
		p := newTestPool(b, c, spreadPool(b, cl, c, 2, 40))
		b.ResetTimer()
		rt.n.Store(0)
		for i := range b.N {
			from, to := "a", "b"
			if i%2 == 1 {
				from, to = to, from
			}
			if err := p.Transfer(ctx, from, to, 10, fmt.Sprint("t", i)); err != nil {
				b.Fatal(err)
			}
		}
		if pairNs > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/pairNs, "x-pair")
		}
		b.ReportMetric(float64(rt.n.Load())/float64(b.N), "rt/op")
	})
}
