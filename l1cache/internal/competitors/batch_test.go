package competitors

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/viccon/sturdyc"
)

// BenchmarkFeedPageMiss reads a feed page of 50 keys that nobody holds yet (new keys every
// page), so each read loads from the source: with celebrity.Cache, as 50 Gets (the
// reference) and as one GetMany with a BatchLoader (one source query per page, and the
// fleet-wide fill leases and Redis copies that come with it), and with sturdyc's
// GetOrFetchBatch (one source query per page, in this process only: nothing is shared with
// other instances). queries/op counts the source queries. Report the ratios of ns/op.
func BenchmarkFeedPageMiss(b *testing.B) {
	srv := celebritytest.Standalone(b)
	prefix := celebritytest.NewPrefix(b)
	var queries atomic.Int64
	load := func(_ context.Context, key string) (celebrity.Versioned[string], error) {
		queries.Add(1)
		return celebrity.Versioned[string]{Value: "body of " + key, Version: 1}, nil
	}
	batch := func(_ context.Context, keys []string) (map[string]celebrity.Versioned[string], error) {
		queries.Add(1)
		out := make(map[string]celebrity.Versioned[string], len(keys))
		for _, k := range keys {
			out[k] = celebrity.Versioned[string]{Value: "body of " + k, Version: 1}
		}
		return out, nil
	}
	c, err := celebrity.New(srv.Client(b), load, celebrity.Options[string]{Prefix: prefix, BatchLoader: batch,
		Loop: celebrity.LoopOptions{ReportInterval: -1}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	sc := sturdyc.New[string](100_000, 10, time.Minute, 10, sturdyc.WithNoContinuousEvictions())
	fetch := func(_ context.Context, ids []string) (map[string]string, error) {
		queries.Add(1)
		out := make(map[string]string, len(ids))
		for _, id := range ids {
			out[id] = "body of " + id
		}
		return out, nil
	}
	page := 0
	keys := func() []string {
		page++
		ks := make([]string, 50)
		for i := range ks {
			ks[i] = "post:" + strconv.Itoa(page) + ":" + strconv.Itoa(i)
		}
		return ks
	}
	ctx := context.Background()
	run := func(name string, read func(ks []string) error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			queries.Store(0)
			for range b.N {
				b.StopTimer()
				ks := keys()
				b.StartTimer()
				if err := read(ks); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(queries.Load())/float64(b.N), "queries/op")
		})
	}
	run("celebrity-gets", func(ks []string) error {
		for _, k := range ks {
			if _, err := c.Get(ctx, k); err != nil {
				return err
			}
		}
		return nil
	})
	run("celebrity-getmany", func(ks []string) error {
		_, err := c.GetMany(ctx, ks)
		return err
	})
	run("sturdyc-batch", func(ks []string) error {
		_, err := sc.GetOrFetchBatch(ctx, ks, sc.BatchKeyFn("post"), fetch)
		return err
	})
}
