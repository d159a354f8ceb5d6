package celebrity_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// batchOf returns a BatchLoader over src that counts its calls.
func batchOf(src *source, calls *atomic.Int64) celebrity.BatchLoader[string] {
	return func(ctx context.Context, keys []string) (map[string]celebrity.Versioned[string], error) {
		calls.Add(1)
		out := map[string]celebrity.Versioned[string]{}
		for _, k := range keys {
			if got, err := src.load(ctx, k); err == nil {
				out[k] = got
			}
		}
		return out, nil
	}
}

// TestGetManyLoadsEachKeyOnceAcrossTheFleet has 5 instances × 8 goroutines each ask for
// overlapping batches of 20 of 40 keys at once, none of them in Redis yet (one key the
// source does not have): every key reaches the source once for the whole fleet, with the
// Loader per key and with a BatchLoader, and every caller gets every value it asked for.
func TestGetManyLoadsEachKeyOnceAcrossTheFleet(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		for _, batched := range []bool{false, true} {
			t.Run(map[bool]string{false: "loader", true: "batch-loader"}[batched], func(t *testing.T) {
				p := celebritytest.NewPrefix(t)
				src := newSource()
				keys := make([]string, 40)
				for i := range keys {
					keys[i] = fmt.Sprintf("%spost:%d", p, i)
					if i != 7 {
						src.bump(keys[i])
					}
				}
				var calls atomic.Int64
				caches := make([]*celebrity.Cache[string], 5)
				for i := range caches {
					o := celebrity.Options[string]{}
					if batched {
						o.BatchLoader = batchOf(src, &calls)
					}
					caches[i] = newCache(t, d.client(t), src, p, o)
				}
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range 5 * 8 {
					wg.Go(func() {
						<-start
						from := (i * 3) % len(keys)
						batch := make([]string, 20)
						for j := range batch {
							batch[j] = keys[(from+j)%len(keys)]
						}
						got, err := caches[i%5].GetMany(t.Context(), batch)
						if err != nil {
							t.Error(err)
							return
						}
						for _, k := range batch {
							v, ok := got[k]
							if k == keys[7] {
								if ok {
									t.Errorf("%s: got %q for a key the source does not have", k, v)
								}
								continue
							}
							if v != "v1" {
								t.Errorf("%s: got %q (present %v)", k, v, ok)
							}
						}
					})
				}
				close(start)
				wg.Wait()
				for _, k := range keys {
					require.LessOrEqual(t, src.loadsOf(k), int64(1), "key %s", k)
					if k != keys[7] {
						require.Equal(t, int64(1), src.loadsOf(k), "key %s", k)
					}
				}
				t.Logf("batch loader calls: %d for %d keys", calls.Load(), len(keys))
			})
		}
	})
}

// TestGetManyMissOfThirtyKeysIsOneQuery: a GetMany of 30 keys that neither the L1 nor Redis
// holds is one BatchLoader call; another instance's GetMany of them reads Redis with one
// round trip (a pipeline) and loads nothing; a third GetMany on the first is answered by its
// L1 without a command.
func TestGetManyMissOfThirtyKeysIsOneQuery(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = fmt.Sprintf("%spost:%d", p, i)
		src.bump(keys[i])
	}
	var calls atomic.Int64
	o := celebrity.Options[string]{BatchLoader: batchOf(src, &calls), Fresh: time.Hour}
	a := newCache(t, srv.Client(t), src, p, o)
	got, err := a.GetMany(t.Context(), keys)
	require.NoError(t, err)
	require.Len(t, got, 30)
	require.Equal(t, int64(1), calls.Load(), "one source query for the 30 keys")

	trips := &tripCounter{}
	bc := srv.Client(t)
	bc.AddHook(trips)
	b := newCache(t, bc, src, p, o)
	trips.reset()
	got, err = b.GetMany(t.Context(), keys)
	require.NoError(t, err)
	require.Len(t, got, 30)
	require.Equal(t, int64(1), calls.Load(), "Redis holds them: nothing loaded")
	require.Equal(t, [2]int64{0, 1}, trips.read(), "commands, pipelines: one round trip")

	trips.reset()
	got, err = b.GetMany(t.Context(), keys)
	require.NoError(t, err)
	require.Len(t, got, 30)
	require.Equal(t, [2]int64{0, 0}, trips.read(), "the L1 answers")
}

// tripCounter is a go-redis hook that counts single commands and pipelines of data (the
// connection handshake and pub/sub left out).
type tripCounter struct{ cmds, pipes atomic.Int64 }

func (h *tripCounter) reset()         { h.cmds.Store(0); h.pipes.Store(0) }
func (h *tripCounter) read() [2]int64 { return [2]int64{h.cmds.Load(), h.pipes.Load()} }
func (h *tripCounter) DialHook(next redis.DialHook) redis.DialHook {
	return next
}
func (h *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "get", "set", "evalsha", "eval", "blpop", "spublish", "publish":
			h.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if n := c.Name(); n == "set" || n == "get" || n == "evalsha" {
				h.pipes.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// BenchmarkGetManyVersusGets reads a feed page of 50 keys that Redis holds and the L1 does
// not (Fresh 1 ns, no Stale, and the timer stopped for 2 ms between pages so that the L1's
// millisecond clock moves on: every read goes to Redis) with one GetMany, against the
// reference, 50 Gets one after the other. Report the ratio of ns/op.
func BenchmarkGetManyVersusGets(b *testing.B) {
	deploymentsB(b, func(b *testing.B, client func(testing.TB) redis.UniversalClient) {
		p := celebritytest.NewPrefix(b)
		src := newSource()
		keys := make([]string, 50)
		for i := range keys {
			keys[i] = fmt.Sprintf("%spost:%d", p, i)
			src.bump(keys[i])
		}
		c := newCache(b, client(b), src, p, celebrity.Options[string]{Fresh: time.Nanosecond, Stale: -1})
		ctx := context.Background()
		if _, err := c.GetMany(ctx, keys); err != nil {
			b.Fatal(err)
		}
		b.Run("gets", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				expire(b)
				for _, k := range keys {
					if _, err := c.Get(ctx, k); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run("getmany", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				expire(b)
				got, err := c.GetMany(ctx, keys)
				if err != nil || len(got) != len(keys) {
					b.Fatal(len(got), err)
				}
			}
		})
	})
}

// expire lets the L1's clock (one read a millisecond) move past the 1 ns Fresh window of
// every entry, with the benchmark's timer stopped.
func expire(b *testing.B) {
	b.StopTimer()
	time.Sleep(2 * time.Millisecond)
	b.StartTimer()
}

// deploymentsB runs fn on the shared standalone server and on the shared cluster.
func deploymentsB(b *testing.B, fn func(b *testing.B, client func(testing.TB) redis.UniversalClient)) {
	b.Run("standalone", func(b *testing.B) {
		srv := celebritytest.Standalone(b)
		fn(b, func(t testing.TB) redis.UniversalClient { return srv.Client(t) })
	})
	b.Run("cluster", func(b *testing.B) {
		cl := celebritytest.SharedCluster(b)
		fn(b, func(t testing.TB) redis.UniversalClient { return cl.Client(t) })
	})
}
