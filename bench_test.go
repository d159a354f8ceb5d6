package celebrity_test

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/l1cache"
)

const benchKeys = 1 << 12

// BenchmarkGetHit compares a fresh hit of Cache.Get with a fresh hit of a bare l1cache.Cache
// (the reference) in the same run, over Zipf-distributed keys and over one hot key. The
// Cache's hit is the L1's hit plus a key check and a pointer dereference. Run with -cpu=1,2.
func BenchmarkGetHit(b *testing.B) {
	srv := celebritytest.Standalone(b)
	p := celebritytest.NewPrefix(b)
	workloads := map[string][]string{"zipf": testkit.ZipfKeys(p, 1<<16, benchKeys), "hotkey": {p + "celebrity"}}
	for _, name := range []string{"zipf", "hotkey"} {
		keys := workloads[name]
		b.Run(name+"/l1cache", func(b *testing.B) {
			c, err := l1cache.New(func(ctx context.Context, key string) (string, error) { return key, nil },
				l1cache.Options[string]{MaxEntries: 2 * benchKeys, Fresh: time.Hour, Beta: l1cache.RecommendedBeta})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for _, k := range keys {
				c.Set(k, k)
			}
			ctx := context.Background()
			testkit.BenchParallel(b, keys, func(k string) bool {
				_, err := c.Get(ctx, k)
				return err == nil
			})
		})
		b.Run(name+"/celebrity", func(b *testing.B) {
			c, err := celebrity.New(srv.Client(b), func(ctx context.Context, key string) (celebrity.Versioned[string], error) {
				return celebrity.Versioned[string]{Value: key, Version: 1}, nil
			}, celebrity.Options[string]{Prefix: p, MaxEntries: 2 * benchKeys, Fresh: time.Hour,
				Loop: celebrity.LoopOptions{ReportInterval: -1}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			if err := c.Ready(ctx); err != nil {
				b.Fatal(err)
			}
			for _, k := range keys {
				if _, err := c.Get(ctx, k); err != nil {
					b.Fatal(err)
				}
			}
			loads := c.Stats().L1.Loads
			testkit.BenchParallel(b, keys, func(k string) bool {
				_, err := c.Get(ctx, k)
				return err == nil
			})
			if s := c.Stats().L1; s.Loads != loads || s.Hits == 0 {
				b.Fatalf("not a hit benchmark: %+v", s)
			}
		})
	}
}
