package hotkeys_test

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestMemoryBoundedBySketchSize streams millions of distinct keys: the number of tracked
// keys never exceeds Capacity×Buckets and the live heap does not grow with the number of
// keys seen.
func TestMemoryBoundedBySketchSize(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	const capacity, buckets = 256, 4
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, Capacity: capacity, Buckets: buckets, Window: 4 * time.Second,
		EvalInterval: -1, Clock: clk.Now,
	})
	require.NoError(t, err)
	defer d.Close()

	next := 0
	feed := func(n int) {
		for range n {
			d.Observe("distinct:" + strconv.Itoa(next))
			next++
			if next%2_000 == 0 {
				clk.Advance(100 * time.Millisecond) // the window slides over the stream
				require.LessOrEqual(t, d.Stats().Tracked, int64(capacity*buckets))
			}
		}
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}

	feed(20_000) // fill every sub-window once
	before := heap()
	feed(200_000)
	after := heap()
	st := d.Stats()
	require.LessOrEqual(t, st.Tracked, int64(capacity*buckets))
	require.Positive(t, st.Evictions)
	require.Positive(t, st.Rotations)
	growth := int64(after) - int64(before)
	t.Logf("heap before %d B, after 200,000 more distinct keys %d B (growth %d B)", before, after, growth)
	// 200,000 retained keys would take over 6 MB; the sketch may only churn.
	require.Less(t, growth, int64(1<<20), "the heap does not grow with the number of distinct keys")
}

// TestWindowForgetsOldTraffic checks that load leaves the window once its sub-windows
// expire and that rates divide by the history actually covered.
func TestWindowForgetsOldTraffic(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, Window: 10 * time.Second, Buckets: 5, EvalInterval: -1, Clock: clk.Now,
	})
	require.NoError(t, err)
	defer d.Close()

	// 100 requests per 100ms for 4s: 1000/s, 400 for "old".
	for range 40 {
		for range 100 {
			d.Observe("old")
		}
		clk.Advance(100 * time.Millisecond)
	}
	top, err := d.Top(5)
	require.NoError(t, err)
	require.Len(t, top, 1)
	require.Equal(t, "old", top[0].Key)
	require.Equal(t, 4000.0, top[0].Count)
	require.Zero(t, top[0].Error, "one key never overflows the sketch")
	require.InDelta(t, 1000, top[0].Rate, 1e-9, "4000 requests over the 4s covered")
	require.Equal(t, 1.0, top[0].Share)
	require.InDelta(t, 1000, d.TotalRate(), 1e-9)

	clk.Advance(10 * time.Second) // a full window later
	d.Observe("new")
	top, err = d.Top(5)
	require.NoError(t, err)
	require.Len(t, top, 1, "the old traffic left the window")
	require.Equal(t, "new", top[0].Key)
}

// TestShardViewSkew attributes keys with a routing-style function and checks the rates,
// the shares and the skew factor, idle shards included.
func TestShardViewSkew(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, EvalInterval: -1, Clock: clk.Now,
		Shard: func(key string) string {
			tenant, _, _ := strings.Cut(key, "/")
			return map[string]string{"a": "s1", "b": "s2", "c": "s3"}[tenant]
		},
		AllShards: func() []string { return []string{"s1", "s2", "s3", "s4"} },
	})
	require.NoError(t, err)
	defer d.Close()
	// Over 2s: s1 gets 8000, s2 and s3 1000 each, s4 nothing, "z/x" is unattributed.
	for i := range 8000 {
		d.Observe("a/" + strconv.Itoa(i%10))
	}
	for i := range 1000 {
		d.Observe("b/" + strconv.Itoa(i))
		d.Observe("c/" + strconv.Itoa(i))
		d.Observe("z/x")
	}
	clk.Advance(2 * time.Second)
	sv, err := d.ShardView()
	require.NoError(t, err)
	require.Len(t, sv.Shards, 4)
	require.Equal(t, "s1", sv.Shards[0].Shard)
	require.InDelta(t, 4000, sv.Shards[0].Rate, 1e-9)
	require.InDelta(t, 0.8, sv.Shards[0].Share, 1e-9)
	require.Equal(t, "s4", sv.Shards[3].Shard)
	require.Zero(t, sv.Shards[3].Rate)
	require.InDelta(t, 1250, sv.Mean, 1e-9, "10000 requests over 4 shards and 2s")
	require.InDelta(t, 3.2, sv.Skew, 1e-9, "max/mean = 4000/1250")

	snap := d.Snapshot()
	require.NotNil(t, snap.Shards)
	require.InDelta(t, 3.2, snap.Shards.Skew, 1e-9)
	require.InDelta(t, 5500, snap.TotalRate, 1e-9, "11000 requests over 2s")
	require.Len(t, snap.Top, hotkeys.DefaultTopK)

	plain, err := hotkeys.New(hotkeys.Options{EvalInterval: -1})
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.ShardView()
	require.ErrorIs(t, err, hotkeys.ErrNoShards)
	require.Nil(t, plain.Snapshot().Shards)
}

// TestObserveCostWeighsKeys checks that costs, not calls, rank the keys.
func TestObserveCostWeighsKeys(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	d, err := hotkeys.New(hotkeys.Options{SampleRate: 1, EvalInterval: -1, Clock: clk.Now})
	require.NoError(t, err)
	defer d.Close()
	for range 100 {
		d.ObserveCost("small", 10)
	}
	d.ObserveCost("big", 5000)
	d.ObserveCost("free", 0)
	clk.Advance(time.Second)
	top, err := d.Top(3)
	require.NoError(t, err)
	require.Len(t, top, 2, "a zero cost records nothing")
	require.Equal(t, "big", top[0].Key)
	require.InDelta(t, 5000.0/6000, top[0].Share, 1e-9)
}

func TestBadInputIsRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    hotkeys.Options
		want string
	}{
		{"negative sample rate", hotkeys.Options{SampleRate: -0.5}, "Options.SampleRate must be in (0, 1], got -0.5"},
		{"sample rate above 1", hotkeys.Options{SampleRate: 1.5}, "Options.SampleRate must be in (0, 1], got 1.5"},
		{"capacity too small", hotkeys.Options{Capacity: 3}, "Options.Capacity must be 16..1048576, got 3"},
		{"one bucket", hotkeys.Options{Buckets: 1}, "Options.Buckets must be 2..64, got 1"},
		{"window too short", hotkeys.Options{Window: time.Millisecond}, "Options.Window must be at least"},
		{"share thresholds inverted", hotkeys.Options{HotShare: 0.1, CoolShare: 0.2}, "Options.CoolShare must be below Options.HotShare (0.1), got 0.2"},
		{"share thresholds equal", hotkeys.Options{HotShare: 0.1, CoolShare: 0.1}, "Options.CoolShare must be below"},
		{"rate thresholds inverted", hotkeys.Options{HotRate: 100, CoolRate: 500}, "Options.CoolRate must be below Options.HotRate (100), got 500"},
		{"share above 1", hotkeys.Options{HotShare: 1.5}, "Options.HotShare must be in [0, 1], got 1.5"},
		{"negative rate", hotkeys.Options{HotRate: -1}, "Options.HotRate must be a finite number >= 0, got -1"},
		{"cool share without hot share", hotkeys.Options{HotRate: 10, CoolShare: 0.1}, "Options.CoolShare needs Options.HotShare"},
		{"negative hold", hotkeys.Options{Hold: -time.Second}, "Options.Hold must be >= 0, got -1s"},
		{"top k above capacity", hotkeys.Options{TopK: 5000}, "Options.TopK must be 1..Capacity (1024), got 5000"},
		{"all shards without shard", hotkeys.Options{AllShards: func() []string { return nil }}, "Options.AllShards needs Options.Shard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := hotkeys.New(tc.o)
			require.Nil(t, d)
			require.ErrorIs(t, err, hotkeys.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "hotkeys: "))
		})
	}

	d, err := hotkeys.New(hotkeys.Options{EvalInterval: -1})
	require.NoError(t, err)
	defer d.Close()
	for _, k := range []int{0, -3} {
		_, err := d.Top(k)
		require.ErrorIs(t, err, hotkeys.ErrInvalid)
		require.ErrorContains(t, err, "Top needs k >= 1, got "+strconv.Itoa(k))
	}
	_, err = hotkeys.NewProbe(nil)
	require.ErrorIs(t, err, hotkeys.ErrInvalid)
	_, err = hotkeys.NewClusterShards(t.Context(), nil)
	require.ErrorIs(t, err, hotkeys.ErrInvalid)
	require.False(t, errors.Is(err, hotkeys.ErrUnsupported))
}

// TestConcurrentObserveAndReads runs observers against readers under the race detector and
// checks that no sampled event is lost.
func TestConcurrentObserveAndReads(t *testing.T) {
	d, err := hotkeys.New(hotkeys.Options{SampleRate: 1, EvalInterval: time.Millisecond, Window: time.Hour})
	require.NoError(t, err)
	defer d.Close()
	const goroutines, each = 4, 5000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				d.Observe("g" + strconv.Itoa(g) + ":" + strconv.Itoa(i%50))
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			_, _ = d.Top(10)
			_ = d.Snapshot()
		}
	})
	wg.Wait()
	require.Equal(t, uint64(goroutines*each), d.Stats().Sampled)
	top, err := d.Top(1000)
	require.NoError(t, err)
	require.Len(t, top, goroutines*50)
	sum := 0.0
	for _, l := range top {
		sum += l.Count
		require.Zero(t, l.Error, "200 keys fit the sketch: counts are exact")
	}
	require.Equal(t, float64(goroutines*each), sum)
}

// TestClockGoingBackNeverErasesNewerLoad moves the clock back by exactly one window, onto the
// ring slot of the current sub-window: the event counts there instead of erasing it.
func TestClockGoingBackNeverErasesNewerLoad(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	d, err := hotkeys.New(hotkeys.Options{SampleRate: 1, Window: 10 * time.Second, EvalInterval: -1, Clock: clk.Now})
	require.NoError(t, err)
	defer d.Close()
	clk.Advance(25 * time.Second)
	d.Observe("a")
	clk.Advance(-10 * time.Second)
	d.Observe("a")
	clk.Advance(10 * time.Second)
	top, err := d.Top(1)
	require.NoError(t, err)
	require.Equal(t, 2.0, top[0].Count)
}

// TestShardNamesAreBounded feeds more distinct shard names than a sub-window counts: the
// excess is counted as overflow instead of growing memory.
func TestShardNamesAreBounded(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, Capacity: 16, EvalInterval: -1, Clock: clk.Now,
		Shard: func(key string) string { return "shard-" + key },
	})
	require.NoError(t, err)
	defer d.Close()
	for i := range 1500 {
		d.Observe(strconv.Itoa(i))
	}
	clk.Advance(time.Second)
	sv, err := d.ShardView()
	require.NoError(t, err)
	require.Len(t, sv.Shards, 1024, "one stripe, one sub-window: at most 1024 shard names")
	require.Equal(t, uint64(1500-1024), d.Stats().ShardOverflow)
}
