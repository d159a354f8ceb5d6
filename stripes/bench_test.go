package stripes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// BenchmarkAdd measures Add on the 3-master cluster against the references a striped counter
// replaces: INCR of one hot key (no dedup at all) and the same exactly-once Add on a single
// stripe (all load on one master); 32 callers each. Besides ns/op (client-side throughput), it
// reports hot-master-us/op: the server CPU time (INFO commandstats) spent per operation on
// the busiest master, which is what a hot counter exhausts. Compare the sub-benchmarks of
// one run.
//
//	go test -run '^$' -bench Add -benchtime=1s ./stripes/
func BenchmarkAdd(b *testing.B) {
	cl := celebritytest.SharedCluster(b)
	rc := cl.Client(b)
	ctx := context.Background()
	b.Run("reference=INCR-one-key", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		defer hotMaster(b, cl)()
		key := celebritytest.NewPrefix(b) + "hot"
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := rc.Incr(ctx, key).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("reference=SET-NX-PX+INCRBY", func(b *testing.B) {
		// What a host writes without this package: one key per event with a TTL of the
		// window, and the counter, in one script on the counter's slot.
		b.ReportAllocs()
		b.SetParallelism(16)
		prefix := celebritytest.NewPrefix(b)
		counter := prefix + "{ref}:n"
		var seq atomic.Int64
		b.ResetTimer()
		defer hotMaster(b, cl)()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ev := prefix + "{ref}:e:" + strconv.FormatInt(seq.Add(1), 36)
				if err := setNXScript.Run(ctx, rc, []string{ev, counter}, time.Minute.Milliseconds(), 1).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("stripes=%d/unique-events", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(16)
			c := newCounter(b, rc, Options{Stripes: n})
			require.Zero(b, mustSum(b, c))
			var seq atomic.Int64
			now := time.Now()
			b.ResetTimer()
			defer hotMaster(b, cl)()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := strconv.FormatInt(seq.Add(1), 36)
					if _, err := c.Add(ctx, Event{ID: id, Time: now}, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	b.Run("stripes=16/zipf-retries", func(b *testing.B) {
		// Event IDs drawn from a Zipf distribution over 100,000 IDs: most calls are retries
		// of a few hot events (the duplicate path).
		b.ReportAllocs()
		b.SetParallelism(16)
		c := newCounter(b, rc, Options{Stripes: 16})
		require.Zero(b, mustSum(b, c))
		ids := make([]string, 1<<16)
		z := rand.NewZipf(rand.New(rand.NewPCG(1, 1)), 1.1, 1, 100_000-1)
		for i := range ids {
			ids[i] = fmt.Sprintf("zipf-%d", z.Uint64())
		}
		var seq atomic.Int64
		now := time.Now()
		b.ResetTimer()
		defer hotMaster(b, cl)()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := ids[int(seq.Add(1))%len(ids)]
				if _, err := c.Add(ctx, Event{ID: id, Time: now}, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkMemoryPerEvent reports the used_memory growth per remembered event over 100,000
// events on a dedicated server, for the counter and for the reference of one key per event
// (SET id 1 EX window NX).
//
//	go test -run '^$' -bench MemoryPerEvent -benchtime=1x ./stripes/
func BenchmarkMemoryPerEvent(b *testing.B) {
	const n = 100_000
	addr := celebritytest.NewServer(b, celebritytest.ServerOptions{}).Addr()
	for b.Loop() {
		per := memoryPerEvent(b, addr, Options{Stripes: 16, DedupWindow: 10 * time.Minute}, n)
		b.ReportMetric(per, "B/event")
		ref := referenceKeyPerEvent(b, addr, n)
		b.ReportMetric(ref, "ref-B/event")
		b.ReportMetric(ref/per, "ref/stripes")
	}
}

// referenceKeyPerEvent measures one key with a TTL per event.
func referenceKeyPerEvent(b *testing.B, addr string, n int) float64 {
	ctx := context.Background()
	prefix := celebritytest.NewPrefix(b)
	before := usedMemory(b, addr)
	rc := redis.NewClient(&redis.Options{Addr: addr})
	for i := 0; i < n; i += 1000 {
		_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for k := i; k < i+1000 && k < n; k++ {
				p.SetNX(ctx, fmt.Sprintf("%sm-%08d", prefix, k), 1, 10*time.Minute)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	_ = rc.Close()
	return float64(usedMemory(b, addr)-before) / float64(n)
}

// setNXScript is the reference exactly-once counter: remember the event in a key of its own
// for the window, count it if it was new.
var setNXScript = redis.NewScript(`
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  return redis.call('INCRBY', KEYS[2], ARGV[2])
end
return false`)

// hotMaster snapshots the server time of every master of cl and returns a function that
// reports the largest growth per benchmark operation as hot-master-us/op (INFO
// commandstats). It reads no SLOWLOG: with SLOWLOG on, Redis 7.0 logs the commands a script
// calls too, inside the script's own time, which charges a script per command it runs.
func hotMaster(b *testing.B, cl *celebritytest.Cluster) func() {
	b.Helper()
	masters := cl.Masters()
	clients := make([]*redis.Client, len(masters))
	before := make([]float64, len(masters))
	for i, m := range masters {
		clients[i] = m.Client(b)
		before[i], _ = serverUsec(b, clients[i])
	}
	return func() {
		var hot, total float64
		for i, c := range clients {
			usec, _ := serverUsec(b, c)
			d := usec - before[i]
			hot, total = max(hot, d), total+d
		}
		b.ReportMetric(hot/float64(b.N), "hot-master-us/op")
		b.ReportMetric(total/float64(b.N), "all-masters-us/op")
	}
}

// serverUsec returns the usec INFO commandstats charges to the benchmarked top-level commands
// (EVALSHA, EVAL, INCR) and their number of calls; commands a script calls are already
// inside its time.
func serverUsec(b *testing.B, c *redis.Client) (usec, calls float64) {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(b, err)
	for line := range strings.SplitSeq(info, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval" && name != "cmdstat_incr") {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			if k != "calls" && k != "usec" {
				continue
			}
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(b, err)
			if k == "calls" {
				calls += f
			} else {
				usec += f
			}
		}
	}
	return usec, calls
}

// BenchmarkServerTimePerEvent measures the server time of one new event, interleaving the
// calls on three dedicated servers so that all three see the same machine load: Add's
// scripts on a 1-stripe counter, the SET NX PX + INCRBY reference script, and INCR. It
// reports each one's usec_per_call (INFO commandstats) and Add's ratio to the reference.
// With time=fixed every event carries the same Time; with time=now each carries the current
// time, as a live host's events do (the stripe's latest event time then moves with most
// events). It reads no SLOWLOG (see hotMaster).
//
//	go test -run '^$' -bench ServerTimePerEvent -benchtime=20000x ./stripes/
func BenchmarkServerTimePerEvent(b *testing.B) {
	for _, live := range []bool{false, true} {
		name := "time=fixed"
		if live {
			name = "time=now"
		}
		b.Run(name, func(b *testing.B) { serverTimePerEvent(b, live) })
	}
}

func serverTimePerEvent(b *testing.B, live bool) {
	ctx := context.Background()
	add := celebritytest.NewServer(b, celebritytest.ServerOptions{}).Client(b)
	ref := celebritytest.NewServer(b, celebritytest.ServerOptions{}).Client(b)
	incr := celebritytest.NewServer(b, celebritytest.ServerOptions{}).Client(b)
	c := newCounter(b, add, Options{Stripes: 1, DedupWindow: 10 * time.Minute})
	require.Zero(b, mustSum(b, c))
	now := time.Now()
	step := func(i int) {
		id := "ev-" + strconv.Itoa(i)
		at := now
		if live {
			at = time.Now()
		}
		if _, err := c.Add(ctx, Event{ID: id, Time: at}, 1); err != nil {
			b.Fatal(err)
		}
		if err := setNXScript.Run(ctx, ref, []string{"{n}:e:" + id, "{n}:n"}, (10 * time.Minute).Milliseconds(), 1).Err(); err != nil {
			b.Fatal(err)
		}
		if err := incr.Incr(ctx, "n").Err(); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 100 { // load the scripts
		step(-1 - i)
	}
	for _, s := range []*redis.Client{add, ref, incr} {
		require.NoError(b, s.ConfigResetStat(ctx).Err())
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		step(i)
		i++
	}
	b.StopTimer()
	a, r, n := perCall(b, add, "evalsha"), perCall(b, ref, "evalsha"), perCall(b, incr, "incr")
	b.ReportMetric(a, "add-us/event")
	b.ReportMetric(r, "setnx-us/event")
	b.ReportMetric(n, "incr-us/event")
	b.ReportMetric(a/r, "add/setnx")
}

// perCall returns INFO commandstats' usec_per_call of cmd on c.
func perCall(b *testing.B, c *redis.Client, cmd string) float64 {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(b, err)
	for line := range strings.SplitSeq(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		_, v, _ := strings.Cut(rest, "usec_per_call=")
		v, _, _ = strings.Cut(v, ",")
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(b, err)
		return f
	}
	b.Fatalf("no commandstats for %s", cmd)
	return 0
}
