package migrate_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// seedRaw fills unit u on shard name with n records in routing's stored form.
func seedRaw(b *testing.B, e *env, name string, u routing.Unit, n int) {
	c := e.clients[name].(redis.Cmdable)
	k := routingfmt.Keys(e.shards[name].Keys().Tag(u))
	for i := 0; i < n; i += 1000 {
		vals := make([]any, 0, 2000)
		for j := i; j < min(i+1000, n); j++ {
			vals = append(vals, routingfmt.RecordField("course", fmt.Sprintf("r%d", j)), "1:l:"+fmt.Sprintf("value-%d", j))
		}
		require.NoError(b, c.HSet(context.Background(), k.Records, vals...).Err())
	}
}

// benchShards: idempotency records live 5s in the benchmark, so the unit does not grow by
// every write of every earlier iteration (at the default 24h, 20 migrations under load would
// copy hundreds of thousands of op records by the end, whatever the record count).
var benchShards = routing.ShardOptions{OpRetention: 5 * time.Second}

// load runs writers on u, each at most one write per millisecond, until stop is closed; it
// returns the number of acknowledged writes.
func load(e *env, u routing.Unit, writers int, stop chan struct{}) (wait func() int64) {
	var acks atomic.Int64
	done := make(chan struct{})
	cl := e.client()
	for w := 0; w < writers; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := cl.do(context.Background(), u, "course", fmt.Sprintf("bw%d-%d-%d", w, time.Now().UnixNano(), i),
					routing.Put(fmt.Sprintf("r%d", i%5000), "w"))
				if err == nil {
					acks.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	return func() int64 {
		for w := 0; w < writers; w++ {
			<-done
		}
		return acks.Load()
	}
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// BenchmarkMigrate measures the protocol (snapshot and catch-up while writers keep writing,
// barrier, final catch-up, verification, flip) against the reference an operator would
// otherwise use: close the source, copy everything, open the target. One iteration is one
// migration (the unit goes back and forth). Metrics: copy rate (records/s, start to
// barrier), write pause (barrier to flip) p50/p99, and the reference's pause.
func BenchmarkMigrate(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("records=%d/protocol", n), func(b *testing.B) {
			b.ReportAllocs()
			e := newEnv(b, benchShards)
			u := routing.BucketUnit(1)
			e.openOwner(u)
			seedRaw(b, e, "a", u, n)
			co := e.coordinator(migrate.Options{BatchSize: 1000})
			stop := make(chan struct{})
			wait := load(e, u, 2, stop)
			var pauses []time.Duration
			var copied int64
			var copyTime time.Duration
			to := "b"
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				st, err := co.Migrate(context.Background(), migrate.Spec{Unit: u, Target: to})
				require.NoError(b, err)
				pauses = append(pauses, st.Pause)
				copied += st.Copied
				copyTime += st.ClosedAt.Sub(st.Created)
				to = map[string]string{"a": "b", "b": "a"}[to]
			}
			b.StopTimer()
			close(stop)
			acks := wait()
			b.ReportMetric(float64(copied)/copyTime.Seconds(), "copied/s")
			b.ReportMetric(float64(pct(pauses, 0.5).Microseconds())/1000, "pause-p50-ms")
			b.ReportMetric(float64(pct(pauses, 0.99).Microseconds())/1000, "pause-p99-ms")
			b.ReportMetric(float64(acks)/float64(b.N), "acked-writes/migration")
		})
		b.Run(fmt.Sprintf("records=%d/reference-stop-and-copy", n), func(b *testing.B) {
			b.ReportAllocs()
			e := newEnv(b, routing.ShardOptions{})
			u := routing.BucketUnit(1)
			e.openOwner(u)
			seedRaw(b, e, "a", u, n)
			var pauses []time.Duration
			from, to := "a", "b"
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pauses = append(pauses, stopAndCopy(b, e, u, from, to))
				from, to = to, from
			}
			b.StopTimer()
			b.ReportMetric(float64(n)/pct(pauses, 0.5).Seconds(), "copied/s")
			b.ReportMetric(float64(pct(pauses, 0.5).Microseconds())/1000, "pause-p50-ms")
			b.ReportMetric(float64(pct(pauses, 0.99).Microseconds())/1000, "pause-p99-ms")
		})
	}
}

// stopAndCopy is the reference: close the source, copy every record in pages, open the
// target, publish. The pause is the whole copy.
func stopAndCopy(b *testing.B, e *env, u routing.Unit, from, to string) time.Duration {
	ctx := context.Background()
	t := e.table()
	start := time.Now()
	open := routing.Ownership{Generation: e.own(from, u).Generation, State: routing.StateOpen}
	_, err := e.shards[from].Transition(ctx, u, open, routing.Ownership{Generation: open.Generation, State: routing.StateClosed})
	require.NoError(b, err)
	src, dst := e.clients[from].(redis.Cmdable), e.clients[to].(redis.Cmdable)
	k := routingfmt.Keys(e.shards[from].Keys().Tag(u))
	require.NoError(b, dst.Del(ctx, k.Records).Err())
	var cur uint64
	for {
		kv, next, err := src.HScan(ctx, k.Records, cur, "", 1000).Result()
		require.NoError(b, err)
		if len(kv) > 0 {
			vals := make([]any, len(kv))
			for i, s := range kv {
				vals[i] = s
			}
			require.NoError(b, dst.HSet(ctx, k.Records, vals...).Err())
		}
		if cur = next; cur == 0 {
			break
		}
	}
	prev := e.own(to, u)
	_, err = e.shards[to].Transition(ctx, u, prev, routing.Ownership{Generation: t.Generation + 1, State: routing.StateOpen})
	require.NoError(b, err)
	nt := t.Next()
	nt.SetBucket(u.Bucket, to)
	require.NoError(b, e.store.Publish(ctx, nt))
	return time.Since(start)
}

// BenchmarkFourthMoveWithADayOfWriteHistory measures what a move of a bucket costs when the
// bucket carries a day of write history: 304 live records and 39,280 idempotency records
// whose expiries spread over the next 24 h (the retention), as a bucket taking about one
// write every 2.2 s for a day holds. Three moves (A -> B -> A) run untimed; the fourth
// (A -> B) is timed. Metrics: items copied by the fourth move (snapshot and log), and its
// duration.
//
// The reference moves every live idempotency record (the default OpRetryWindow, the
// retention); window=1h moves those of the last hour only.
func BenchmarkFourthMoveWithADayOfWriteHistory(b *testing.B) {
	for _, tc := range []struct {
		name   string
		window time.Duration
	}{{"reference-window=24h", 0}, {"window=1h", time.Hour}} {
		b.Run(tc.name, func(b *testing.B) { fourthMove(b, tc.window) })
	}
}

func fourthMove(b *testing.B, window time.Duration) {
	const records, ops = 304, 39_280
	ctx := context.Background()
	var copied int64
	var took time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newEnv(b, routing.ShardOptions{})
		u := routing.BucketUnit(1)
		e.openOwner(u)
		gen := e.table().Generation
		res, err := e.shards["a"].Exec(ctx, u, gen, "course", "hist-seed", routing.Put("r0", "v"))
		require.NoError(b, err)
		require.True(b, res.Applied)
		seedRaw(b, e, "a", u, records)
		c := e.clients["a"].(redis.Cmdable)
		k := routingfmt.Keys(e.shards["a"].Keys().Tag(u))
		rec, err := c.HGet(ctx, k.Ops, routing.OpKey("course", "hist-seed")).Result()
		require.NoError(b, err)
		now := time.Now()
		for j := 0; j < ops; j += 1000 {
			vals := make([]any, 0, 2000)
			exps := make([]redis.Z, 0, 1000)
			for n := j; n < min(j+1000, ops); n++ {
				id := fmt.Sprintf("hist-%d", n)
				vals = append(vals, id, rec)
				// Written n/ops of a day ago: expires that much before a fresh record.
				at := now.Add(24*time.Hour - time.Duration(ops-n)*24*time.Hour/ops)
				exps = append(exps, redis.Z{Score: float64(at.UnixMilli()), Member: id})
			}
			require.NoError(b, c.HSet(ctx, k.Ops, vals...).Err())
			require.NoError(b, c.ZAdd(ctx, k.OpExpiry, exps...).Err())
		}
		co := e.coordinator(migrate.Options{OpRetryWindow: window})
		to := "b"
		for m := 1; m <= 4; m++ {
			if m == 4 {
				b.StartTimer()
			}
			start := time.Now()
			st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: to})
			require.NoError(b, err)
			if m == 4 {
				b.StopTimer()
				copied += st.Copied + st.LogApplied
				took += time.Since(start)
			}
			to = map[string]string{"a": "b", "b": "a"}[to]
		}
	}
	b.ReportMetric(float64(copied)/float64(b.N), "items-copied/move")
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms/move")
}
