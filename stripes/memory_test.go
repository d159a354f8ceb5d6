package stripes

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// usedMemory returns INFO memory's used_memory of the server at addr, once the measuring
// connection is the server's only client: client buffers are part of used_memory and the
// server accounts them lazily, so the workload's connections are closed before measuring.
func usedMemory(tb testing.TB, addr string) int64 {
	tb.Helper()
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer rc.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		list, err := rc.ClientList(ctx).Result()
		require.NoError(tb, err)
		if strings.Count(strings.TrimSpace(list), "\n") == 0 {
			break
		}
		require.True(tb, time.Now().Before(deadline), "the workload's connections must close:\n%s", list)
	}
	info, err := rc.Info(ctx, "memory").Result()
	require.NoError(tb, err)
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(tb, err)
			return n
		}
	}
	tb.Fatal("INFO memory has no used_memory")
	return 0
}

// rememberEvents counts n distinct events of time at in c from 16 goroutines; fresh says
// whether they are new (else they are retries of events counted before, which carry the
// same ID and the same Time as the first attempt, as Event requires).
func rememberEvents(tb testing.TB, c *Counter, tag string, n int, fresh bool, at time.Time) {
	tb.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				res, err := c.Add(ctx, Event{ID: fmt.Sprintf("%s-%08d", tag, i), Time: at}, 1)
				if err != nil || res.Applied != fresh {
					tb.Errorf("event %d: %v %+v", i, err, res)
					return
				}
			}
		})
	}
	wg.Wait()
}

// memoryPerEvent returns the growth of used_memory per remembered event over n events on
// the dedicated server at addr. The events are counted through a client of their own,
// closed before each measurement. A warm-up of 4,000 events and their 4,000 retries first
// creates the layout and stripes, loads the script and absorbs the server's one-time growth
// on its first bursts of script calls and set splits (40-80 KB on redis 7.0, seen with
// retries alone, which would otherwise be charged to the events).
func memoryPerEvent(tb testing.TB, addr string, o Options, n int) float64 {
	tb.Helper()
	const warm = 4000
	o.Prefix = celebritytest.NewPrefix(tb)
	run := func(tag string, n int) {
		w := redis.NewClient(&redis.Options{Addr: addr})
		defer w.Close()
		c := newCounter(tb, w, o)
		at := time.Now()
		rememberEvents(tb, c, tag, n, true, at)
		if tag == "warm" {
			// The retries carry the first attempts' Time: with a later one, a pass that
			// crossed a dedup slice's end would count them as new events.
			rememberEvents(tb, c, tag, n, false, at)
		}
		if tag != "warm" {
			require.Equal(tb, int64(n+warm), mustSum(tb, c))
		}
	}
	run("warm", warm)
	before := usedMemory(tb, addr)
	run("m", n)
	after := usedMemory(tb, addr)
	return float64(after-before) / float64(n)
}

func TestMemoryPerRememberedEventIsAtMost16Bytes(t *testing.T) {
	addr := celebritytest.NewServer(t, celebritytest.ServerOptions{}).Addr()
	const n = 20_000
	// 4 stripes, so that the warm-up (1,000 events per stripe) has split every stripe's
	// first set; BenchmarkMemoryPerEvent measures 16 stripes over 100,000 events.
	per := memoryPerEvent(t, addr, Options{Stripes: 4, DedupWindow: 10 * time.Minute}, n)
	t.Logf("%.2f bytes of used_memory per remembered event over %d events, 4 stripes", per, n)
	require.LessOrEqual(t, per, 16.0)
}

// BenchmarkColdCounters reports the keys and used_memory that 10,000 cold counters (one
// event each) take on a dedicated server, in one run: as names of a Family (one stripe
// each until promoted), as Counters of one stripe, and as Counters of 16 stripes (what a host
// without adaptive striping provisions for the counters that may get hot). The ratios
// compare the family with each.
//
//	go test -run '^$' -bench ColdCounters -benchtime=1x ./stripes/
func BenchmarkColdCounters(b *testing.B) {
	const n = 10_000
	addr := celebritytest.NewServer(b, celebritytest.ServerOptions{}).Addr()
	ctx := context.Background()
	name := func(i int) string { return fmt.Sprintf("post:%d:views", i) }
	// measure runs fill with a fresh client and returns keys and bytes per counter.
	measure := func(fill func(rc *redis.Client, prefix string)) (keys, bytes float64) {
		prefix := celebritytest.NewPrefix(b)
		before := usedMemory(b, addr)
		rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
		fill(rc, prefix)
		_ = rc.Close()
		used := usedMemory(b, addr) - before
		return float64(keysAt(b, addr, prefix)) / n, float64(used) / n
	}
	counters := func(stripes int) func(rc *redis.Client, prefix string) {
		return func(rc *redis.Client, prefix string) {
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Go(func() {
					for i := w; i < n; i += 16 {
						c, err := New(rc, Options{Name: name(i), Prefix: prefix, Stripes: stripes, SealInterval: -1})
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := c.Add(ctx, Event{ID: "v1", Time: time.Now()}, 1); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		}
	}
	family := func(rc *redis.Client, prefix string) {
		f, err := NewFamily(rc, FamilyOptions{Counter: Options{Prefix: prefix}, HotStripes: 16, HotRate: 1000})
		require.NoError(b, err)
		defer f.Close()
		const batch = 500
		for from := 0; from < n; from += batch {
			adds := make([]FamilyAddition, 0, batch)
			for i := from; i < from+batch; i++ {
				adds = append(adds, FamilyAddition{Name: name(i), Event: Event{ID: "v1", Time: time.Now()}, Delta: 1})
			}
			_, errs := f.AddBatch(ctx, adds)
			for _, err := range errs {
				require.NoError(b, err)
			}
		}
	}
	for b.Loop() {
		fk, fb := measure(family)
		k1, b1 := measure(counters(1))
		k16, b16 := measure(counters(16))
		b.ReportMetric(fk, "family-keys/counter")
		b.ReportMetric(fb, "family-B/counter")
		b.ReportMetric(k1, "c1-keys/counter")
		b.ReportMetric(b1, "c1-B/counter")
		b.ReportMetric(k16, "c16-keys/counter")
		b.ReportMetric(b16, "c16-B/counter")
		b.ReportMetric(fb/b1, "family/c1-bytes")
		b.ReportMetric(fb/b16, "family/c16-bytes")
	}
}
