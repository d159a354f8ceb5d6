package ratelimit

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The fleet of the HotRate tests: 4 instances; the hot key gets about 40 requests/s from
// each (160/s in the fleet's sum, none hot on its own), the cold key about 15/s from each
// (60/s); the limit, 100/s per key, is below the hot key's demand so the budget runs out.
const (
	heatFleet   = 4
	heatRate    = 100.0
	heatHotKey  = "merchant:hot"
	heatColdKey = "merchant:cold"
	heatEvery   = 25 * time.Millisecond // 40/s per instance
	heatColdEv  = 66 * time.Millisecond // 15/s per instance
	heatTrickle = 500 * time.Millisecond
)

func heatOptions() Options {
	return Options{Limit: Limit{Rate: 200, Period: 2 * time.Second}, Mode: Leased, HotRate: heatRate}
}

// pace calls Allow(key) on l every interval until stop is closed, counting errors.
func pace(ctx context.Context, wg *sync.WaitGroup, l *Limiter, key string, every time.Duration, stop <-chan struct{}, errs *atomic.Int64) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := l.Allow(ctx, key); err != nil {
				errs.Add(1)
			}
		}
	}()
}

// watchKeys makes l report the admissions of each key of byKey to its recorder.
func watchKeys(l *Limiter, byKey map[string]*admissions) {
	SetAdmitHook(l, func(key string, at time.Time, n int64) {
		a := byKey[key]
		if a == nil {
			return
		}
		a.mu.Lock()
		for range n {
			a.times = append(a.times, at)
		}
		a.mu.Unlock()
	})
}

// everyInstance tells whether ok holds for every limiter.
func everyInstance(lims []*Limiter, ok func(*Limiter) bool) bool {
	for _, l := range lims {
		if !ok(l) {
			return false
		}
	}
	return true
}

// requireHotInTheSumLeases drives the HotRate story on limiters over clients from mk: the hot
// key turns hot on every instance, the cold key never does, the hot key turns cold again
// once its traffic drops to a trickle, and neither key's window is ever exceeded. It returns
// the number of calls that returned an error.
func requireHotInTheSumLeases(t *testing.T, mk func() Client) int64 {
	o := heatOptions()
	o.Prefix = celebritytest.NewPrefix(t)
	hot, cold := &admissions{}, &admissions{}
	lims := instances(t, heatFleet, mk, o, nil)
	for _, l := range lims {
		watchKeys(l, map[string]*admissions{heatHotKey: hot, heatColdKey: cold})
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var errs atomic.Int64
	stopHot, stopCold, stopTrickle := make(chan struct{}), make(chan struct{}), make(chan struct{})
	for _, l := range lims {
		pace(ctx, &wg, l, heatHotKey, heatEvery, stopHot, &errs)
		pace(ctx, &wg, l, heatColdKey, heatColdEv, stopCold, &errs)
	}
	start := time.Now()
	require.Eventually(t, func() bool {
		return everyInstance(lims, func(l *Limiter) bool { return Leases(l, heatHotKey) })
	}, 30*time.Second, 5*time.Millisecond, "the hot key leases on every instance")
	promoted := time.Since(start)
	// Keep both keys busy for about two more windows (counted in cold-key admissions, not
	// time): the cold key, at 60/s in the sum, never leases.
	coldBefore := cold.total()
	require.Eventually(t, func() bool { return cold.total() >= coldBefore+240 }, 30*time.Second, 5*time.Millisecond)
	for i, l := range lims {
		require.False(t, Leases(l, heatColdKey), "instance %d leases the cold key", i)
		require.Equal(t, int64(1), l.Stats().Leasing, "instance %d", i)
	}
	// The hot key's traffic drops to a trickle (2/s per instance): every instance goes
	// back to the exact path after the cool-down.
	close(stopHot)
	for _, l := range lims {
		pace(ctx, &wg, l, heatHotKey, heatTrickle, stopTrickle, &errs)
	}
	stopped := time.Now()
	require.Eventually(t, func() bool {
		return everyInstance(lims, func(l *Limiter) bool { return !Leases(l, heatHotKey) && l.Stats().Leasing == 0 })
	}, 30*time.Second, 5*time.Millisecond, "the hot key goes back to the exact path on every instance")
	demoted := time.Since(stopped)
	close(stopCold)
	close(stopTrickle)
	wg.Wait()
	sub, k := SubMs(lims[0]), lims[0].o.span()
	worstHot, worstCold := hot.worstWindow(sub, k), cold.worstWindow(sub, k)
	var hotSw, coldSw, chunks uint64
	for _, l := range lims {
		s := l.Stats()
		hotSw, coldSw, chunks = hotSw+s.HotSwitches, coldSw+s.ColdSwitches, chunks+s.Chunks
		require.Equal(t, s.HotSwitches, s.ColdSwitches)
	}
	t.Logf("leasing on every instance after %v, exact again %v after the drop; switches %d hot, %d cold; %d chunks; %d errors; worst window hot %d, cold %d, limit %d",
		promoted.Round(time.Millisecond), demoted.Round(time.Millisecond), hotSw, coldSw, chunks, errs.Load(), worstHot, worstCold, o.Limit.Rate)
	require.LessOrEqual(t, worstHot, o.Limit.Rate, "hot key: admitted in one window")
	require.LessOrEqual(t, worstCold, o.Limit.Rate, "cold key: admitted in one window")
	require.Greater(t, worstHot, o.Limit.Rate/2, "the hot key's demand is above its limit")
	return errs.Load()
}

// A key hot only in the fleet's sum (4 instances at 40/s, HotRate 100/s) leases on every
// instance, a key at 60/s in the sum never does, and the hot key goes back to the exact
// path once its traffic drops; the limit holds across the switches.
func TestHotInTheFleetsSumLeasesEverywhereAndBack(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		require.Zero(t, requireHotInTheSumLeases(t, clients(t, c)))
	})
}

// The same with a reply lost about every 30ms and go-redis's retries on: retried requests
// may count twice in the estimate, never in the limit. A call may fail when its every
// attempt lost its reply; the test counts such errors but does not forbid them.
func TestHotInTheFleetsSumKeepsTheLimitThroughLostReplies(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		inj := faults.New()
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(30 * time.Millisecond)
			defer tick.Stop()
			var armed int64
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					// One drop armed at a time, so drops do not pile up into a burst.
					if inj.Dropped() >= armed {
						armed++
						inj.DropReply(faults.Match{Command: "EVALSHA", Arg: ":merchant:"}, 1)
					}
				}
			}
		}()
		errs := requireHotInTheSumLeases(t, faultyClients(t, c, inj, 3))
		close(stop)
		<-done
		require.Positive(t, inj.Dropped())
		t.Logf("%d replies dropped, %d calls failed", inj.Dropped(), errs)
	})
}

func TestHotRateOptionsRefused(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	base := heatOptions()
	for _, tc := range []struct {
		name string
		edit func(*Options)
	}{
		{"NaN", func(o *Options) { o.HotRate = math.NaN() }},
		{"+Inf", func(o *Options) { o.HotRate = math.Inf(1) }},
		{"-Inf", func(o *Options) { o.HotRate = math.Inf(-1) }},
		{"negative", func(o *Options) { o.HotRate = -1 }},
		{"with HotKeys", func(o *Options) { o.HotKeys = flippingHot{period: time.Second} }},
		{"Exact mode", func(o *Options) { o.Mode, o.Window = Exact, Sliding }},
		{"Approximate mode", func(o *Options) { o.Mode = Approximate }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			_, err := New(rdb, o)
			require.True(t, errors.Is(err, ErrInvalid), "%v", err)
			require.ErrorContains(t, err, "Options.HotRate")
		})
	}
	newLimiter(t, rdb, base) // accepted
}

// The estimate from one reply: seen requests over span full sub-windows plus the current
// one's elapsed part, times Slots.
func TestFleetRateEstimate(t *testing.T) {
	l := &Limiter{o: Options{Slots: 3, Window: Sliding, SubWindows: 10, Limit: Limit{Period: 2 * time.Second}}, sub: 200}
	// 11 full sub-windows (2.2s) and 99ms of the current one, plus 1ms: 2.3s.
	got := l.fleetRate(takeReply{seen: 230, nowMs: 200*1000 + 99})
	require.InDelta(t, 300.0, got, 1e-9)
}
