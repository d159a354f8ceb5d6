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

// BenchmarkServerTimeOnBusiestMaster measures what a hot counter exhausts: the server time
// per new event on the busiest master. Add runs on a dedicated 3-master cluster, the
// reference script (SET <event> NX PX <window> + INCRBY, see setNXScript) on another one,
// the calls interleaved so that both clusters see the same machine load; every event
// carries the current time, as a live host's do. For a Counter and for a name of a Family,
// at 1 stripe (a cold name) and 16 stripes (spread 6/5/5 over the masters), it reports the
// EVALSHA time (INFO commandstats) of Add's busiest master and of the reference's master
// per event, and their ratio.
//
//	go test -run '^$' -bench ServerTimeOnBusiestMaster -benchtime=20000x ./stripes/
func BenchmarkServerTimeOnBusiestMaster(b *testing.B) {
	addCl := celebritytest.NewCluster(b, celebritytest.ClusterOptions{})
	refCl := celebritytest.NewCluster(b, celebritytest.ClusterOptions{})
	add, ref := addCl.Client(b), refCl.Client(b)
	ctx := context.Background()
	for _, kind := range []string{"counter", "family"} {
		for _, n := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/stripes=%d", kind, n), func(b *testing.B) {
				prefix := celebritytest.Prefix(b)
				o := Options{Prefix: prefix, Stripes: n, DedupWindow: 10 * time.Minute, SealInterval: -1}
				var addFn func(ev Event) error
				if kind == "counter" {
					c := newCounter(b, add, o)
					addFn = func(ev Event) error { _, err := c.Add(ctx, ev, 1); return err }
				} else {
					f := newFamily(b, add, FamilyOptions{Counter: o, Interval: -1})
					addFn = func(ev Event) error { _, err := f.Add(ctx, "post:1:views", ev, 1); return err }
				}
				step := func(i int) {
					id := "ev-" + strconv.Itoa(i)
					if err := addFn(Event{ID: id, Time: time.Now()}); err != nil {
						b.Fatal(err)
					}
					keys := []string{prefix + "{n}:e:" + id, prefix + "{n}:n"}
					if err := setNXScript.Run(ctx, ref, keys, (10 * time.Minute).Milliseconds(), 1).Err(); err != nil {
						b.Fatal(err)
					}
				}
				for i := range 200 { // create the counter, load the scripts, open the slices
					step(-1 - i)
				}
				addBefore, refBefore := evalshaUsec(b, addCl), evalshaUsec(b, refCl)
				i := 0
				for b.Loop() {
					step(i)
					i++
				}
				a := busiest(addBefore, evalshaUsec(b, addCl)) / float64(b.N)
				r := busiest(refBefore, evalshaUsec(b, refCl)) / float64(b.N)
				b.ReportMetric(a, "add-hot-us/event")
				b.ReportMetric(r, "setnx-hot-us/event")
				b.ReportMetric(a/r, "add/setnx")
			})
		}
	}
}

// evalshaUsec returns the EVALSHA usec INFO commandstats reports for every master of cl.
func evalshaUsec(b *testing.B, cl *celebritytest.Cluster) []float64 {
	b.Helper()
	var out []float64
	for _, m := range cl.Masters() {
		info, err := m.Client(b).Info(context.Background(), "commandstats").Result()
		require.NoError(b, err)
		var usec float64
		for line := range strings.SplitSeq(info, "\r\n") {
			rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
			if !ok {
				continue
			}
			_, v, _ := strings.Cut(rest, "usec=")
			v, _, _ = strings.Cut(v, ",")
			usec, err = strconv.ParseFloat(v, 64)
			require.NoError(b, err)
		}
		out = append(out, usec)
	}
	return out
}

// busiest returns the largest growth between two evalshaUsec snapshots.
func busiest(before, after []float64) float64 {
	var hot float64
	for i := range after {
		hot = max(hot, after[i]-before[i])
	}
	return hot
}

// BenchmarkColdNameMemory reports the keys and used_memory per cold name (10,000 names of a
// Family with its default options, 3 events each) on a dedicated server, against the naive
// exactly-once script a host would write instead (setNXScript: one key per event for the
// window, one counter key per name), in one run.
//
//	go test -run '^$' -bench ColdNameMemory -benchtime=1x ./stripes/
func BenchmarkColdNameMemory(b *testing.B) {
	const names, events = 10_000, 3
	addr := celebritytest.NewServer(b, celebritytest.ServerOptions{}).Addr()
	ctx := context.Background()
	name := func(i int) string { return fmt.Sprintf("post:%d:views", i) }
	measure := func(fill func(rc *redis.Client, prefix string)) (keys, bytes float64) {
		prefix := celebritytest.Prefix(b)
		before := usedMemory(b, addr)
		rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
		fill(rc, prefix)
		_ = rc.Close()
		used := usedMemory(b, addr) - before
		return float64(keysAt(b, addr, prefix)) / names, float64(used) / names
	}
	family := func(rc *redis.Client, prefix string) {
		f, err := NewFamily(rc, FamilyOptions{Counter: Options{Prefix: prefix}})
		require.NoError(b, err)
		defer f.Close()
		const batch = 500
		for from := 0; from < names; from += batch {
			for e := range events {
				adds := make([]FamilyAddition, 0, batch)
				for i := from; i < from+batch; i++ {
					adds = append(adds, FamilyAddition{Name: name(i), Event: Event{ID: "v" + strconv.Itoa(e), Time: time.Now()}, Delta: 1})
				}
				_, errs := f.AddBatch(ctx, adds)
				for _, err := range errs {
					require.NoError(b, err)
				}
			}
		}
	}
	naive := func(rc *redis.Client, prefix string) {
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := w; i < names; i += 16 {
					for e := range events {
						keys := []string{prefix + "{" + name(i) + "}:e:v" + strconv.Itoa(e), prefix + "{" + name(i) + "}:n"}
						if err := setNXScript.Run(ctx, rc, keys, DefaultDedupWindow.Milliseconds(), 1).Err(); err != nil {
							b.Error(err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
	}
	for b.Loop() {
		nk, nb := measure(naive) // first: it also absorbs the server's one-time growth
		fk, fb := measure(family)
		b.ReportMetric(fk, "family-keys/name")
		b.ReportMetric(fb, "family-B/name")
		b.ReportMetric(nk, "naive-keys/name")
		b.ReportMetric(nb, "naive-B/name")
		b.ReportMetric(fb/nb, "family/naive-bytes")
	}
}

// keysAt returns the number of keys under prefix on the server at addr, through a connection
// of its own closed before it returns (usedMemory waits for every other client to leave).
func keysAt(tb testing.TB, addr, prefix string) int {
	tb.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer rc.Close()
	keys, err := rc.Keys(context.Background(), prefix+"*").Result()
	require.NoError(tb, err)
	return len(keys)
}
