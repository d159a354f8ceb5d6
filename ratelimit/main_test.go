package ratelimit

import (
	"context"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

func TestMain(m *testing.M) {
	// CELEBRITYTEST_ACL=ratelimit runs every test as a user holding only the package's rule.
	celebritytest.RegisterRule("ratelimit", func(p string) []string { return ACLRule(Options{Prefix: p}) })
	// The runnable examples use the shared standalone server; the kit stops it at the end.
	os.Setenv("REDIS_ADDR", celebritytest.Standalone(celebritytest.ForMain()).Addr())
	celebritytest.Main(m)
}

// newLimiter returns a Limiter under a prefix unique to t, closed when t ends.
func newLimiter(t testing.TB, c Client, o Options) *Limiter {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = celebritytest.NewPrefix(t)
	}
	l, err := New(c, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// admissions records admission decisions from the test hook of many limiters.
type admissions struct {
	mu    sync.Mutex
	times []time.Time
}

// watch makes l report its admissions to a.
func (a *admissions) watch(l *Limiter) {
	SetAdmitHook(l, func(_ string, at time.Time, n int64) {
		a.mu.Lock()
		for range n {
			a.times = append(a.times, at)
		}
		a.mu.Unlock()
	})
}

// perSub returns the admissions per sub-window of sub ms, keyed by sub-window index.
func (a *admissions) perSub(sub int64) map[int64]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[int64]int64{}
	for _, t := range a.times {
		out[t.UnixMilli()/sub]++
	}
	return out
}

// worstWindow returns the largest number of admissions in k consecutive sub-windows of sub ms.
func (a *admissions) worstWindow(sub int64, k int) int64 {
	counts := a.perSub(sub)
	var worst int64
	for first := range counts {
		for start := first - int64(k) + 1; start <= first; start++ {
			var s int64
			for i := start; i < start+int64(k); i++ {
				s += counts[i]
			}
			worst = max(worst, s)
		}
	}
	return worst
}

// total returns the number of admissions.
func (a *admissions) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.times)
}

// sorted returns the admission instants in order.
func (a *admissions) sorted() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]time.Time(nil), a.times...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// hammer runs workers goroutines per limiter, each calling Allow(key) until stop is
// closed or dur has passed (sleeping 1ms after a denial), and returns the number of calls
// that returned an error.
func hammer(ctx context.Context, lims []*Limiter, key string, workers int, dur time.Duration, stop <-chan struct{}) int64 {
	var wg sync.WaitGroup
	var errs atomic.Int64
	end := time.Now().Add(dur)
	for _, l := range lims {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					select {
					case <-stop:
						return
					default:
					}
					res, err := l.Allow(ctx, key)
					if err != nil {
						errs.Add(1)
					}
					if !res.Allowed {
						// A denied client backs off a little, as real callers do; without it
						// the denials, answered locally, would starve the goroutines that
						// talk to Redis.
						time.Sleep(time.Millisecond)
					}
				}
			}()
		}
	}
	wg.Wait()
	return errs.Load()
}

// instances returns n limiters with the same options, each over its own client from mk.
func instances(t testing.TB, n int, mk func() Client, o Options, a *admissions) []*Limiter {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = celebritytest.NewPrefix(t)
	}
	out := make([]*Limiter, n)
	for i := range out {
		out[i] = newLimiter(t, mk(), o)
		if a != nil {
			a.watch(out[i])
		}
	}
	return out
}

// clients returns a constructor of separate clients of the same deployment as c.
func clients(t testing.TB, c redis.UniversalClient) func() Client {
	t.Helper()
	switch c := c.(type) {
	case *redis.ClusterClient:
		addrs := c.Options().Addrs
		return func() Client {
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
			t.Cleanup(func() { _ = cc.Close() })
			return cc
		}
	case *redis.Client:
		addr := c.Options().Addr
		return func() Client {
			rc := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = rc.Close() })
			return rc
		}
	}
	t.Fatalf("unknown client %T", c)
	return nil
}
