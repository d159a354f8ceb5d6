// Package ratelimit_bench measures package ratelimit against github.com/go-redis/redis_rate
// on the same 3-master Redis Cluster: one limit key hammered by 20 instances (each with its
// own cluster client) far beyond its limit. Redis's own counters (INFO commandstats, reset
// before each run) give the commands and the server time per admitted request; the hottest
// master's time shows whether the load of one limit spreads.
//
//	go test -run '^$' -bench . -benchtime 5s
package ratelimit_bench

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { celebritytest.Main(m) }

const (
	instances = 20
	rate      = 5000 // per second, for the one hot key
	key       = "merchant:42"
)

// allowFunc admits one request of the hot key, or not.
type allowFunc func(ctx context.Context) (bool, error)

// serverLoad is what Redis counted on each master: commands and microseconds.
type serverLoad struct {
	calls, usec []int64
}

func resetStats(b *testing.B, cl *celebritytest.Cluster) {
	b.Helper()
	for _, m := range cl.Masters() {
		if err := m.Client(b).ConfigResetStat(context.Background()).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// readStats sums INFO commandstats of every master.
func readStats(b *testing.B, cl *celebritytest.Cluster) serverLoad {
	b.Helper()
	var s serverLoad
	for _, m := range cl.Masters() {
		info, err := m.Client(b).Info(context.Background(), "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		var calls, usec int64
		for _, line := range strings.Split(info, "\n") {
			if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info") ||
				strings.HasPrefix(line, "cmdstat_config") {
				continue
			}
			for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
				k, v, _ := strings.Cut(f, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "calls":
					calls += n
				case "usec":
					usec += n
				}
			}
		}
		s.calls = append(s.calls, calls)
		s.usec = append(s.usec, usec)
	}
	return s
}

// run hammers the key through the instances and reports per admitted request: Redis
// commands, server µs on the hottest master, that master's share of all server time, and
// admitted/(rate × elapsed).
func run(b *testing.B, cl *celebritytest.Cluster, allows []allowFunc) {
	b.ReportAllocs()
	b.SetParallelism(8)
	// Warm up: load scripts, fill connection pools, let the first window pass.
	for _, a := range allows {
		_, _ = a(context.Background())
	}
	time.Sleep(1100 * time.Millisecond)
	resetStats(b, cl)
	var admitted, errs atomic.Int64
	var next atomic.Int64
	var perSecond [120]atomic.Int64 // admissions per second since start
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		a := allows[int(next.Add(1))%len(allows)]
		ctx := context.Background()
		for pb.Next() {
			ok, err := a(ctx)
			switch {
			case err != nil:
				errs.Add(1)
			case ok:
				admitted.Add(1)
				if s := int(time.Since(start) / time.Second); s < len(perSecond) {
					perSecond[s].Add(1)
				}
			}
		}
	})
	b.StopTimer()
	elapsed := time.Since(start)
	load := readStats(b, cl)
	var calls, usec, hot int64
	for i := range load.calls {
		calls += load.calls[i]
		usec += load.usec[i]
		hot = max(hot, load.usec[i])
	}
	n := float64(max(admitted.Load(), 1))
	b.ReportMetric(float64(calls)/n, "cmds/admit")
	b.ReportMetric(float64(hot)/n, "hot-µs/admit")
	b.ReportMetric(float64(hot)/float64(max(usec, 1)), "hot-share")
	// Accuracy: the most any whole second inside the run admitted, against the limit (the
	// first and last, partial or warming, seconds are left out; 0 when the run is too short).
	var worst int64
	for s := 1; s+1 < int(elapsed/time.Second) && s < len(perSecond); s++ {
		worst = max(worst, perSecond[s].Load())
	}
	b.ReportMetric(float64(worst)/rate, "max-sec/limit")
	b.ReportMetric(float64(admitted.Load())/(rate*elapsed.Seconds()), "admit/limit")
	b.ReportMetric(float64(errs.Load()), "errors")
}

// clients returns instances cluster clients of cl.
func clients(b *testing.B, cl *celebritytest.Cluster) []*redis.ClusterClient {
	out := make([]*redis.ClusterClient, instances)
	for i := range out {
		out[i] = cl.Client(b, func(o *redis.ClusterOptions) { o.PoolSize = 16 })
	}
	return out
}

// BenchmarkHotLimitKey is the single hot key: the reference (redis_rate, GCRA per request)
// and each mode of package ratelimit, in one run on one cluster.
func BenchmarkHotLimitKey(b *testing.B) {
	cl := celebritytest.SharedCluster(b)
	b.Run("redis_rate", func(b *testing.B) {
		var allows []allowFunc
		prefix := celebritytest.NewPrefix(b)
		for _, c := range clients(b, cl) {
			lim := redis_rate.NewLimiter(c)
			allows = append(allows, func(ctx context.Context) (bool, error) {
				r, err := lim.Allow(ctx, prefix+key, redis_rate.PerSecond(rate))
				return err == nil && r.Allowed > 0, err
			})
		}
		run(b, cl, allows)
	})
	for _, m := range []struct {
		name string
		o    ratelimit.Options
	}{
		{"exact-gcra", ratelimit.Options{Mode: ratelimit.Exact}},
		{"exact-sliding", ratelimit.Options{Mode: ratelimit.Exact, Window: ratelimit.Sliding}},
		{"leased", ratelimit.Options{Mode: ratelimit.Leased, Slots: 3}},
		{"approximate", ratelimit.Options{Mode: ratelimit.Approximate}},
	} {
		b.Run(m.name, func(b *testing.B) {
			var allows []allowFunc
			o := m.o
			o.Limit = ratelimit.Limit{Rate: rate, Period: time.Second}
			o.Prefix = celebritytest.NewPrefix(b)
			for _, c := range clients(b, cl) {
				lim, err := ratelimit.New(c, o)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = lim.Close() })
				allows = append(allows, func(ctx context.Context) (bool, error) {
					r, err := lim.Allow(ctx, key)
					return r.Allowed, err
				})
			}
			run(b, cl, allows)
		})
	}
}
