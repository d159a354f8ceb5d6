package escrow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// downstream stands for the system the permits protect: it records which job holds which
// permit between a grant's return and the call to Release, and reports any permit held
// twice and any moment with more holders than capacity.
type downstream struct {
	mu       sync.Mutex
	holders  map[int]string
	maxHeld  int
	capacity int
	errs     []string
}

func (d *downstream) enter(permit int, job string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if other, ok := d.holders[permit]; ok {
		d.errs = append(d.errs, fmt.Sprintf("permit %d granted to %s while %s holds it", permit, job, other))
	}
	d.holders[permit] = job
	d.maxHeld = max(d.maxHeld, len(d.holders))
	if len(d.holders) > d.capacity {
		d.errs = append(d.errs, fmt.Sprintf("%d permits held, capacity %d", len(d.holders), d.capacity))
	}
}

func (d *downstream) leave(permit int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.holders, permit)
}

type limiter interface {
	acquire(ctx context.Context, worker int, job string) (Grant, error)
	release(ctx context.Context, worker int, job string) error
	Audit(ctx context.Context) (AuditReport, error)
}

type centralLimiter struct{ *Central }

func (c centralLimiter) acquire(ctx context.Context, _ int, job string) (Grant, error) {
	return c.Acquire(ctx, job)
}
func (c centralLimiter) release(ctx context.Context, _ int, job string) error {
	return c.Release(ctx, job)
}

type poolLimiter struct{ *Pool }

func (p poolLimiter) owner(w int) string { return p.order[w%len(p.order)] }
func (p poolLimiter) acquire(ctx context.Context, w int, job string) (Grant, error) {
	return p.Acquire(ctx, p.owner(w), job)
}
func (p poolLimiter) release(ctx context.Context, w int, job string) error {
	return p.Release(ctx, p.owner(w), job)
}

// TestConcurrentAcquireReleaseWithLostRepliesNeverExceedsCapacity runs 50 workers, each on
// its own client whose replies are dropped now and then (go-redis retries the command). Each
// worker audits the server side after each of its steps, and the downstream checks every
// instant between a grant's return and its release.
func TestConcurrentAcquireReleaseWithLostRepliesNeverExceedsCapacity(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel()
	const (
		workers  = 50
		rounds   = 14
		capacity = 12
	)
	kinds := map[string]func(t *testing.T, c Client) limiter{
		"central": func(t *testing.T, c Client) limiter { return centralLimiter{newTestCentral(t, c, capacity)} },
		"pool": func(t *testing.T, c Client) limiter {
			return poolLimiter{newTestPool(t, c, PoolOptions{Capacity: capacity, Owners: owners(capacity, "a", "b", "c")})}
		},
	}
	for _, kind := range []string{"central", "pool"} {
		t.Run(kind, func(t *testing.T) {
			celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
				ctx := testkit.Ctx(t)
				preload(t, c)
				lim := kinds[kind](t, c)
				d := &downstream{holders: map[int]string{}, capacity: capacity}
				var dropped, granted, exhausted, audits atomic.Int64
				var wg sync.WaitGroup
				for w := range workers {
					inj := faults.New()
					var wc Client
					if _, ok := c.(*redis.ClusterClient); ok {
						wc = celebritytest.SharedCluster(t).Client(t, func(o *redis.ClusterOptions) { o.Dialer = inj.Dialer(nil) })
					} else {
						wc = celebritytest.Standalone(t).Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil) })
					}
					worker := rebind(lim, wc)
					// audit checks the server side exactly after a step of this worker: every
					// ledger is read atomically, and without transfers each ledger stands alone.
					audit := func(step string, minHeld int) bool {
						rep, err := worker.Audit(ctx)
						audits.Add(1)
						if err != nil || !rep.Clean() || rep.Held > capacity || rep.Held < minHeld {
							t.Errorf("audit after %s: %v %s", step, err, rep)
							return false
						}
						return true
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer func() { dropped.Add(inj.Dropped()) }()
						for i := range rounds {
							job := fmt.Sprintf("w%d-%d", w, i)
							if i%4 == w%4 {
								inj.DropReply(faults.Match{Command: "EVALSHA", Arg: acquireScript.Hash()}, 1)
							}
							g, err := worker.acquire(ctx, w, job)
							if errors.Is(err, ErrExhausted) {
								exhausted.Add(1)
								continue
							}
							if err != nil {
								t.Errorf("acquire %s: %v", job, err)
								return
							}
							granted.Add(1)
							d.enter(g.Permit, job)
							if !audit("acquire "+job, 1) {
								return
							}
							time.Sleep(time.Duration(i%3) * time.Millisecond) // the job runs
							d.leave(g.Permit)
							dropped := i%4 == (w+1)%4
							if dropped {
								inj.DropReply(faults.Match{Command: "EVALSHA", Arg: releaseScript.Hash()}, 1)
							}
							// After a dropped reply go-redis retries, and the retry finds
							// the permit freed by the first run.
							if err := worker.release(ctx, w, job); err != nil && !(dropped && errors.Is(err, ErrNotHeld)) {
								t.Errorf("release %s: %v", job, err)
								return
							}
							if !audit("release "+job, 0) {
								return
							}
						}
					}()
				}
				wg.Wait()
				require.Empty(t, d.errs)
				require.Positive(t, dropped.Load(), "lost replies must have happened")
				require.Positive(t, granted.Load())
				require.Positive(t, exhausted.Load(), "the workload must hit the limit")
				rep := requireClean(t, lim)
				require.Equal(t, 0, rep.Held)
				require.Equal(t, capacity, rep.Free, "retries after lost replies must not leak or add permits")
				t.Logf("%s: %d grants, %d exhausted, %d lost replies, %d audits, max %d held at once",
					kind, granted.Load(), exhausted.Load(), dropped.Load(), audits.Load(), d.maxHeld)
			})
		})
	}
}

// rebind returns the same limiter (same keys) driven through another client.
func rebind(l limiter, c Client) limiter {
	switch x := l.(type) {
	case centralLimiter:
		return centralLimiter{&Central{c: c, opts: x.opts, l: x.l}}
	case poolLimiter:
		np, err := NewPool(c, x.opts)
		if err != nil {
			panic(err)
		}
		return poolLimiter{np}
	}
	panic("unknown limiter")
}
