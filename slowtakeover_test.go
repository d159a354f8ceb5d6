package celebrity_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// slowInjector writes the slow reports of n simulated instances into the summary, as each
// would on its turn (instance i in the intervals s with (s+i)%every == 0, on shard i%shards):
// every window of every intervals then holds exactly one report per instance, rate each,
// so the fleet's sum the leader must see is exactly n×rate.
// injected counts the intervals written.
func slowInjector(t *testing.T, rdb redis.UniversalClient, prefix, key string, n, every, shards int, rate float64, iv time.Duration) (injected *atomic.Int64, stop func()) {
	injected = new(atomic.Int64)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	tags := celebrity.SummaryTags(prefix, shards)
	wg.Go(func() {
		last := int64(0)
		for ctx.Err() == nil {
			now := time.Now().UnixNano()
			slot := now / int64(iv)
			// Mid-interval, well before the leader's full evaluation of the interval.
			if slot != last && time.Duration(now%int64(iv)) >= iv/4 && time.Duration(now%int64(iv)) < iv*3/4 {
				last = slot
				for i := range n {
					if (slot+int64(i))%int64(every) != 0 {
						continue
					}
					sum := tags[i%shards] + ":" + strconv.FormatInt(slot, 10)
					pipe := rdb.TxPipeline()
					pipe.HSetNX(ctx, sum, "r:fake"+strconv.Itoa(i), 1)
					pipe.HIncrByFloat(ctx, sum, "s:"+key, rate)
					pipe.PExpire(ctx, sum, time.Duration(every+2)*iv)
					if _, err := pipe.Exec(ctx); err != nil && ctx.Err() == nil {
						t.Errorf("inject: %v", err)
					}
				}
				injected.Add(1)
			}
			time.Sleep(iv / 20)
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return injected, stop
}

// gate holds back every command of a client while it is shut (a paused process).
type gate struct {
	mu   sync.RWMutex
	shut bool
}

func (g *gate) pause() { g.mu.Lock(); g.shut = true }
func (g *gate) resume() {
	if g.shut {
		g.shut = false
		g.mu.Unlock()
	}
}
func (g *gate) wait() {
	g.mu.RLock()
	shut := g.shut // always false here: a shut gate holds the write lock
	g.mu.RUnlock()
	_ = shut
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { g.wait(); return next(ctx, cmd) }
}
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { g.wait(); return next(ctx, cmds) }
}

// TestSlowLaneLeaderTakeover: the fleet's slow reports of a key add up to just under or
// just over PromoteRate, and the leader is closed (or paused until another instance took
// its lease, then resumed: two leaders for a moment) before the window fills, so that the
// instance that takes over decides from the reports it reads back. Just under, the key is
// never promoted (a report counted twice, from the read-back and from memory, would take
// it over); just over, it is promoted at the fleet's true rate, not more; when the reports
// stop it is demoted once, with no flap.
func TestSlowLaneLeaderTakeover(t *testing.T) {
	celebritytest.Long(t)
	const (
		every = 4
		n     = 20
		iv    = 100 * time.Millisecond
	)
	for i, tc := range []struct {
		name   string
		sum    float64 // the fleet's slow-lane rate, against PromoteRate 100
		promo  bool
		paused bool
	}{{"under", 92, false, false}, {"over", 108, true, false}, {"over-paused", 108, true, true}, {"under-paused", 92, false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			deployments(t, func(t *testing.T, d deployment) {
				// Quick mode runs each case on one deployment: under and over-paused on the
				// standalone server, over and under-paused on the cluster.
				k := 0
				if d.cluster {
					k = 1
				}
				if !celebritytest.Spread(i, k, 2) {
					t.Skipf("quick mode: %s runs on the other deployment; %s=1 runs it on both", tc.name, celebritytest.FullEnv)
				}
				p := celebritytest.NewPrefix(t)
				src := newSource()
				key := p + "lukewarm"
				src.bump(key)
				var caches []*celebrity.Cache[string]
				recs := make([]*recorder, 3)
				gates := make([]*gate, 3)
				for i := range recs {
					recs[i], gates[i] = &recorder{}, &gate{}
					o := loopOptions()
					o.Loop.SlowReportEvery = every
					o.OnEvent = recs[i].add
					rdb := d.client(t)
					rdb.AddHook(gates[i])
					caches = append(caches, newCache(t, rdb, src, p, o))
					t.Cleanup(gates[i].resume)
				}
				leaderOf := func(cs []*celebrity.Cache[string]) *celebrity.Cache[string] {
					for _, c := range cs {
						if c.Stats().Leader {
							return c
						}
					}
					return nil
				}
				var first *celebrity.Cache[string]
				require.Eventually(t, func() bool { first = leaderOf(caches); return first != nil }, 30*time.Second, 10*time.Millisecond)
				waitHeartbeats(t, first, 2)

				injected, stop := slowInjector(t, d.client(t), p, key, n, every, 4, tc.sum/n, iv)
				// The leader goes before the window fills (every-1 intervals of reports: under
				// PromoteRate); the window fills while its lease runs out.
				require.Eventually(t, func() bool { return injected.Load() >= every-1 }, 30*time.Second, time.Millisecond)
				g := gates[indexOf(caches, first)]
				if tc.paused {
					g.pause()
				} else {
					require.NoError(t, first.Close())
				}
				var rest []*celebrity.Cache[string]
				for _, c := range caches {
					if c != first {
						rest = append(rest, c)
					}
				}
				var next *celebrity.Cache[string]
				require.Eventually(t, func() bool { next = leaderOf(rest); return next != nil }, 30*time.Second, 10*time.Millisecond)
				if tc.paused {
					// The old leader resumes believing it leads until its next poll.
					g.resume()
					rest = caches
				}
				if !tc.promo {
					waitHeartbeats(t, next, 4*every)
					for i, r := range recs {
						nn, ev := r.count(celebrity.EventPromoted, key)
						require.Zero(t, nn, "instance %d: promoted at %.3f, the fleet's slow sum is %.0f", i, ev.Rate, tc.sum)
					}
					require.True(t, hotEverywhere(rest, key, false))
					return
				}
				// The reports stop as the new leader takes over: it promotes the key only if it
				// reads back the window's earlier intervals.
				stop()
				require.Eventually(t, func() bool { return hotEverywhere(rest, key, true) }, 30*time.Second, 10*time.Millisecond)
				for _, c := range rest {
					r := recs[indexOf(caches, c)]
					nn, ev := r.count(celebrity.EventPromoted, key)
					require.Equal(t, 1, nn)
					require.GreaterOrEqual(t, ev.Rate, 100.0)
					require.LessOrEqual(t, ev.Rate, tc.sum+0.01, "no slow report counted twice")
				}
				require.Eventually(t, func() bool { return hotEverywhere(rest, key, false) }, 30*time.Second, 10*time.Millisecond)
				for _, c := range rest {
					r := recs[indexOf(caches, c)]
					nn, ev := r.count(celebrity.EventDemoted, key)
					require.Equal(t, 1, nn)
					require.Less(t, ev.Rate, 10.0)
					nn, _ = r.count(celebrity.EventPromoted, key)
					require.Equal(t, 1, nn, "no flap")
				}
			})
		})
	}
}

func indexOf(cs []*celebrity.Cache[string], c *celebrity.Cache[string]) int {
	for i, x := range cs {
		if x == c {
			return i
		}
	}
	return -1
}
