package routing_test

import (
	"context"
	"math/rand"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/routing"
)

// zipfTenants returns n tenant draws from a Zipf distribution over 4096 tenant names.
func zipfTenants(n int) []string {
	names := make([]string, 4096)
	for i := range names {
		names[i] = "tenant-" + strconv.Itoa(i)
	}
	z := rand.NewZipf(rand.New(rand.NewSource(1)), 1.1, 1, uint64(len(names)-1))
	out := make([]string, n)
	for i := range out {
		out[i] = names[z.Uint64()]
	}
	return out
}

// BenchmarkRoute measures Router.Route against a reference that only hashes and indexes a
// slice (the least any bucket router must do).
func BenchmarkRoute(b *testing.B) {
	f := newFleet(b)
	r := f.router(b, routing.Options{PollInterval: time.Hour}, nil)
	tb := routing.EvenTable(1, 1024, shardNames...)
	for i := 0; i < 64; i++ {
		tb.SetOverride("override-"+strconv.Itoa(i), "k")
	}
	tb.SetOverride("fat", "k")
	tb.SetSpread("viral", []string{"a", "b", "c", "k"})
	ok, err := r.Install(tb)
	require.NoError(b, err)
	require.True(b, ok)
	tenants := zipfTenants(1 << 16)
	owners := make([]string, 1024)
	for i := range owners {
		owners[i] = tb.BucketOwner(uint32(i))
	}
	var sink routing.Route
	b.Run("reference-hash-index", func(b *testing.B) {
		b.ReportAllocs()
		var s string
		for i := 0; b.Loop(); i++ {
			s = owners[hashing.Bucket(tenants[i&(1<<16-1)], 1024)]
		}
		_ = s
	})
	b.Run("hash-zipf", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			sink, _ = r.Route(tenants[i&(1<<16-1)], "")
		}
	})
	b.Run("override-hot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink, _ = r.Route("fat", "order:1")
		}
	})
	b.Run("spread-hot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink, _ = r.Route("viral", "order:1")
		}
	})
	b.Run("hash-zipf-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.Int()
			for pb.Next() {
				i++
				_, _ = r.Route(tenants[i&(1<<16-1)], "")
			}
		})
	})
	_ = sink
}

// BenchmarkGuardedPut compares a guarded Put (ownership check, idempotency record, versioned
// write, change-log entry, in one script) with a plain SET on the same server.
func BenchmarkGuardedPut(b *testing.B) {
	c := celebritytest.Standalone(b).Client(b)
	p := prefix(b)
	s := newShard(b, "a", c, p, routing.ShardOptions{})
	u := routing.BucketUnit(1)
	open(b, s, u, 1)
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	b.Run("reference-set", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := c.Set(ctx, p+":plain:"+keys[i&1023], "value", 0).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	run := 0
	b.Run("guarded-put", func(b *testing.B) {
		b.ReportAllocs()
		run++
		for i := 0; b.Loop(); i++ {
			id := strconv.Itoa(run) + ":" + strconv.Itoa(i)
			if _, err := s.Exec(ctx, u, 1, "t", id, routing.Put(keys[i&1023], "value")); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkInterleaved alternates the measured code and its reference in the same loop, so
// that the reported ratios hold on a machine whose load changes during the run.
func BenchmarkInterleaved(b *testing.B) {
	f := newFleet(b)
	r := f.router(b, routing.Options{PollInterval: time.Hour}, nil)
	tb := routing.EvenTable(1, 1024, shardNames...)
	tb.SetOverride("fat", "k")
	ok, err := r.Install(tb)
	require.NoError(b, err)
	require.True(b, ok)
	tenants := zipfTenants(1 << 16)
	owners := make([]*routing.Shard, 1024)
	for i := range owners {
		owners[i] = r.Shard(tb.BucketOwner(uint32(i)))
	}

	b.Run("route-vs-hash-index", func(b *testing.B) {
		b.ReportAllocs()
		const block = 1024
		var routeNs, refNs time.Duration
		var sink *routing.Shard
		for i := 0; b.Loop(); i++ {
			base := (i * block) & (1<<16 - 1)
			start := time.Now()
			for j := 0; j < block; j++ {
				rt, _ := r.Route(tenants[(base+j)&(1<<16-1)], "")
				sink = rt.Shard
			}
			mid := time.Now()
			for j := 0; j < block; j++ {
				sink = owners[hashing.Bucket(tenants[(base+j)&(1<<16-1)], 1024)]
			}
			refNs += time.Since(mid)
			routeNs += mid.Sub(start)
		}
		_ = sink
		n := float64(b.N) * block
		b.ReportMetric(float64(routeNs)/n, "route-ns")
		b.ReportMetric(float64(refNs)/n, "ref-ns")
		b.ReportMetric(float64(routeNs)/float64(refNs), "route/ref")
	})

	c := f.clients["a"]
	s := r.Shard("a")
	u := routing.BucketUnit(5)
	open(b, s, u, 1)
	ctx := context.Background()
	run := 0
	b.Run("guarded-put-vs-set", func(b *testing.B) {
		run++
		var putNs, setNs time.Duration
		for i := 0; b.Loop(); i++ {
			key := "key-" + strconv.Itoa(i&1023)
			start := time.Now()
			if err := c.Set(ctx, f.prefix+":plain:"+key, "value", 0).Err(); err != nil {
				b.Fatal(err)
			}
			mid := time.Now()
			id := strconv.Itoa(run) + ":" + strconv.Itoa(i)
			if _, err := s.Exec(ctx, u, 1, "t", id, routing.Put(key, "value")); err != nil {
				b.Fatal(err)
			}
			putNs += time.Since(mid)
			setNs += mid.Sub(start)
		}
		b.ReportMetric(float64(setNs)/float64(b.N), "set-ns")
		b.ReportMetric(float64(putNs)/float64(b.N), "put-ns")
		b.ReportMetric(float64(putNs)/float64(setNs), "put/set")
	})
}

// BenchmarkLoadCounting measures what the per-tenant load summary costs a call: Do through
// a Router with Options.Load on, interleaved with the same Do through a Router with it off
// (the reference), on the same shards, over Zipf tenants; and the counting step alone in
// parallel, against Route (the in-memory work every call does anyway).
func BenchmarkLoadCounting(b *testing.B) {
	f := newFleet(b)
	ctx := context.Background()
	require.NoError(b, f.store(b).Publish(ctx, routing.EvenTable(1, 64, "a", "b", "c")))
	off := f.router(b, routing.Options{PollInterval: time.Hour}, nil)
	on := f.router(b, routing.Options{PollInterval: time.Hour, Load: routing.LoadOptions{Enabled: true}}, nil)
	for _, r := range []*routing.Router{off, on} {
		_, err := r.Await(ctx, 1)
		require.NoError(b, err)
	}
	_, err := off.Provision(ctx)
	require.NoError(b, err)
	tenants := zipfTenants(1 << 16)
	run := 0
	b.Run("do-on-vs-off", func(b *testing.B) {
		run++
		var onNs, offNs time.Duration
		for i := 0; b.Loop(); i++ {
			tenant := tenants[i&(1<<16-1)]
			id := strconv.Itoa(run) + ":" + strconv.Itoa(i)
			for j := range 2 { // alternate which goes first, so neither gains from the other
				r, name, sum := off, "off:", &offNs
				if (i+j)&1 == 1 {
					r, name, sum = on, "on:", &onNs
				}
				start := time.Now()
				if _, err := r.Do(ctx, tenant, name+id, routing.Put("k", "v")); err != nil {
					b.Fatal(err)
				}
				*sum += time.Since(start)
			}
		}
		b.ReportMetric(float64(offNs)/float64(b.N), "off-ns")
		b.ReportMetric(float64(onNs)/float64(b.N), "on-ns")
		b.ReportMetric(float64(onNs)/float64(offNs), "on/off")
	})
	b.Run("route-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.Int()
			for pb.Next() {
				i++
				_, _ = on.Route(tenants[i&(1<<16-1)], "")
			}
		})
	})
	b.Run("count-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.Int()
			for pb.Next() {
				i++
				on.CountLoad(tenants[i&(1<<16-1)])
			}
		})
	})
}
