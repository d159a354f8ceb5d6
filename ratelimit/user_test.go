package ratelimit

// Tests that drive the package as a service does: stock go-redis clients (redis.Options{}
// with only an address), the package's default options, several instances each with its
// own client, ordinary load, and a deadline on every request.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// loadSeconds is how long each load level of TestNoDenialBelowHalfTheLimit runs:
// RATELIMIT_LOAD_SECONDS (the full run uses 30), 2 by default.
func loadSeconds(t testing.TB) time.Duration {
	if v := os.Getenv("RATELIMIT_LOAD_SECONDS"); v != "" {
		s, err := strconv.Atoi(v)
		require.NoError(t, err, "RATELIMIT_LOAD_SECONDS")
		return time.Duration(s) * time.Second
	}
	return 2 * time.Second
}

// tally counts the outcomes of paced requests.
type tally struct {
	allowed, denied, errs atomic.Int64
	slowest               atomic.Int64 // nanoseconds past the request's deadline, at most
	firstErr              atomic.Pointer[error]
	firstDenial           atomic.Pointer[Result]
}

// paced sends rate requests per second for key, spread over lims and workers goroutines
// per limiter, for dur, each with its own deadline of timeout, and counts the outcomes. A
// worker that falls behind skips the requests it missed (never sends a burst), so the
// load never exceeds rate.
func paced(lims []*Limiter, key string, rate float64, workers int, dur, timeout time.Duration) *tally {
	var tl tally
	var wg sync.WaitGroup
	every := time.Duration(float64(time.Second) * float64(len(lims)*workers) / rate)
	end := time.Now().Add(dur)
	for i, l := range lims {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Spread the workers' first requests over one interval.
				next := time.Now().Add(every * time.Duration(i*workers+w) / time.Duration(len(lims)*workers))
				for {
					time.Sleep(time.Until(next))
					if time.Now().After(end) {
						return
					}
					tl.one(l, key, timeout)
					next = next.Add(every)
					for now := time.Now(); next.Before(now); next = next.Add(every) {
					}
				}
			}()
		}
	}
	wg.Wait()
	return &tl
}

// one sends one request with its own deadline and counts it.
func (tl *tally) one(l *Limiter, key string, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	r, err := l.Allow(ctx, key)
	if over := time.Since(start) - timeout; over > time.Duration(tl.slowest.Load()) {
		tl.slowest.Store(int64(over))
	}
	switch {
	case err != nil:
		tl.errs.Add(1)
		tl.firstErr.CompareAndSwap(nil, &err)
	case r.Allowed:
		tl.allowed.Add(1)
	default:
		tl.denied.Add(1)
		tl.firstDenial.CompareAndSwap(nil, &r)
		if r.RetryAfter <= 0 {
			err := fmt.Errorf("a denial with RetryAfter %v", r.RetryAfter)
			tl.firstErr.CompareAndSwap(nil, &err)
			tl.errs.Add(1)
		}
	}
}

// Ordinary load admits everything: 4 instances with stock clients, the default options of
// each mode and the README's limit of 5,000 per second, at 1%, 10% and 50% of it. Every
// request is admitted, and none fails. (Leased mode used to deny a request now and then
// when its chunk request was answered in the last moment of a sub-window: the grant was
// dropped and the denial carried RetryAfter -1.)
func TestNoDenialBelowHalfTheLimit(t *testing.T) {
	celebritytest.Long(t)
	const rate = 5000
	dur := loadSeconds(t)
	for i, mode := range []Mode{Exact, Leased, Approximate} {
		t.Run(mode.String(), func(t *testing.T) {
			celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
				// Quick mode runs each mode on one deployment: Exact and Approximate on the
				// standalone server, Leased on the cluster.
				k := 0
				if _, ok := c.(*redis.ClusterClient); ok {
					k = 1
				}
				if !celebritytest.Spread(i, k, 2) {
					t.Skipf("quick mode: %v runs on the other deployment; %s=1 runs it on both", mode, celebritytest.FullEnv)
				}
				o := Options{Limit: Limit{Rate: rate, Period: time.Second}, Mode: mode, Prefix: celebritytest.NewPrefix(t)}
				lims := instances(t, 4, clients(t, c), o, nil)
				for _, load := range []float64{0.01, 0.10, 0.50} {
					key := "merchant:" + strconv.Itoa(int(load*100))
					tl := paced(lims, key, load*rate, 4, dur, 2*time.Second)
					t.Logf("%v, %.0f%% load (%.0f/s) for %v: %d admitted, %d denied, %d failed",
						mode, load*100, load*rate, dur, tl.allowed.Load(), tl.denied.Load(), tl.errs.Load())
					if p := tl.firstErr.Load(); p != nil {
						t.Errorf("%.0f%% load: %v", load*100, *p)
					}
					if p := tl.firstDenial.Load(); p != nil {
						var st Stats
						for _, l := range lims {
							s := l.Stats()
							st.LateGrants += s.LateGrants
							st.SlotTimeouts += s.SlotTimeouts
						}
						t.Errorf("%.0f%% load: denied %+v; late grants %d, slot timeouts %d", load*100, *p, st.LateGrants, st.SlotTimeouts)
					}
					require.Zero(t, tl.denied.Load(), "denials at %.0f%% of the limit", load*100)
					require.Zero(t, tl.errs.Load())
					require.Positive(t, tl.allowed.Load())
				}
			})
		})
	}
}

// Two limits on one key, as a service sets them up (10 per second and 600 per minute on one
// user, in one prefix): each keeps its own count. Before, the keys ignored the limit, and
// the per-second limit denied its first request after 600 through the per-minute one.
func TestTwoLimitsOnOneKeyAreIndependent(t *testing.T) {
	pairs := []struct {
		name       string
		small, big Options
	}{
		{"exact gcra", Options{Limit: Limit{Rate: 10, Period: time.Second}},
			Options{Limit: Limit{Rate: 600, Period: time.Minute}}},
		{"exact gcra bursts", Options{Limit: Limit{Rate: 600, Period: time.Minute, Burst: 10}},
			Options{Limit: Limit{Rate: 600, Period: time.Minute}}},
		{"exact sliding and fixed, one sub-window length", Options{Limit: Limit{Rate: 10, Period: 100 * time.Millisecond}, Window: Fixed},
			Options{Limit: Limit{Rate: 600, Period: time.Second}, Window: Sliding}},
		{"leased", Options{Limit: Limit{Rate: 10, Period: time.Second}, Mode: Leased, Slots: 1},
			Options{Limit: Limit{Rate: 600, Period: time.Minute}, Mode: Leased, Slots: 1}},
		{"approximate", Options{Limit: Limit{Rate: 10, Period: time.Second}, Mode: Approximate},
			Options{Limit: Limit{Rate: 600, Period: time.Minute}, Mode: Approximate}},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
				prefix := celebritytest.NewPrefix(t)
				p.small.Prefix, p.big.Prefix = prefix, prefix
				small, big := newLimiter(t, c, p.small), newLimiter(t, c, p.big)
				key := "user:7"
				spend := func(l *Limiter, n int64) (admitted int64) {
					for range n {
						r, err := l.Allow(t.Context(), key)
						require.NoError(t, err)
						if r.Allowed {
							admitted++
						}
					}
					return admitted
				}
				// Spend most of the big limit, but stay under it.
				require.Equal(t, int64(60), spend(big, 60))
				r, err := small.Allow(t.Context(), key)
				require.NoError(t, err)
				require.True(t, r.Allowed, "the small limit is untouched by the big one's requests: %+v", r)
				// Spend the small limit: the big one still admits.
				spend(small, p.small.Limit.Rate+5)
				r, err = big.Allow(t.Context(), key)
				require.NoError(t, err)
				require.True(t, r.Allowed, "the big limit is untouched by the small one's requests: %+v", r)
			})
		})
	}
}

// A master holding one of a key's three budget slots stops answering (SIGSTOP) for 4s while
// 4 instances with stock cluster clients admit as fast as callers ask, each request with a
// 2s deadline: the other two slots keep serving at least 90% of their capacity, the limit
// is never exceeded, and every request returns by its deadline. Before, every request of
// an instance queued behind one chunk request to the stopped master (go-redis's own
// timeouts: about 5s), and the slot was skipped for one sub-window from the moment that
// request was sent, so the skip had ended when its error came back.
func TestLeasedKeepsServingWhileAMasterIsPaused(t *testing.T) {
	celebritytest.Long(t)
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{})
	var a admissions
	const rate = 300
	o := Options{Limit: Limit{Rate: rate, Period: time.Second}, Mode: Leased}
	lims := instances(t, 4, clients(t, cl.Client(t)), o, &a)
	key := "merchant:paused"
	victim := cl.MasterOf(SlotKey(lims[0], key, 1))
	for _, j := range []int{0, 2} {
		require.NotSame(t, victim, cl.MasterOf(SlotKey(lims[0], key, j)), "slot %d shares the victim", j)
	}
	t.Cleanup(func() {
		if victim.Paused() {
			victim.Resume()
		}
	})
	demand := func(dur time.Duration) *tally { return paced(lims, key, 3*rate, 4, dur, 2*time.Second) }
	demand(1500 * time.Millisecond) // the budget in use before the pause
	victim.Pause()
	paused := time.Now()
	during := demand(4 * time.Second)
	victim.Resume()
	after := demand(1500 * time.Millisecond)

	// Capacity of the two live slots: each grants its Rate/3 share in any 11 consecutive
	// sub-windows of 100ms (Sliding, 10 sub-windows), so at saturation any 11 consecutive
	// sub-windows see 2·Rate/3 granted. Count two such spans, from the first sub-window
	// boundary 1.1s into the pause (the budget spent before it has left the window).
	span := time.Duration(lims[0].o.span()) * ms(SubMs(lims[0]))
	from := paused.Add(span).Truncate(ms(SubMs(lims[0]))).Add(ms(SubMs(lims[0])))
	var got int64
	for _, at := range a.sorted() {
		if !at.Before(from) && at.Before(from.Add(2*span)) {
			got++
		}
	}
	live := 2 * 2 * float64(rate/3)
	worst := a.worstWindow(SubMs(lims[0]), lims[0].o.span())
	t.Logf("paused 4s: %d admitted in 2.2s of it (live slots' capacity %.0f), %d errors, slowest request %v past its deadline; "+
		"before/after the pause: %d/%d admitted; worst window %d/%d",
		got, live, during.errs.Load(), time.Duration(max(during.slowest.Load(), after.slowest.Load())),
		a.total()-int(during.allowed.Load()+after.allowed.Load()), after.allowed.Load(), worst, rate)
	var st Stats
	for _, l := range lims {
		s := l.Stats()
		st.SlotTimeouts += s.SlotTimeouts
		st.Chunks += s.Chunks
		st.Cells += s.Cells
		st.Calls += s.Calls
	}
	t.Logf("stats: %+v", st)
	if p := during.firstErr.Load(); p != nil {
		t.Logf("first error during the pause: %v", *p)
	}
	require.LessOrEqual(t, worst, int64(rate), "never above the limit")
	require.GreaterOrEqual(t, float64(got), 0.9*live, "the live slots kept serving")
	require.LessOrEqual(t, time.Duration(during.slowest.Load()), 50*time.Millisecond, "every request returns by its deadline")
	require.LessOrEqual(t, time.Duration(after.slowest.Load()), 50*time.Millisecond, "every request returns by its deadline")
}

// With a stock client and the master paused, every mode's Allow returns by its deadline
// (plus 50ms), and a request cancelled without a deadline returns at once: go-redis alone
// waits out its ReadTimeout and retries (about 5s) whatever the context says.
func TestAllowReturnsByItsDeadlineWithAPausedMaster(t *testing.T) {
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	c := srv.Client(t)
	modes := []Options{
		{Limit: Limit{Rate: 100, Period: time.Second}},
		{Limit: Limit{Rate: 100, Period: time.Second}, Window: Sliding},
		{Limit: Limit{Rate: 100, Period: time.Second}, Mode: Leased},
		{Limit: Limit{Rate: 100, Period: time.Second}, Mode: Approximate},
	}
	var lims []*Limiter
	for _, o := range modes {
		lims = append(lims, newLimiter(t, c, o))
	}
	srv.Pause()
	defer srv.Resume()
	for i, l := range lims {
		name := modes[i].Mode.String() + "/" + l.o.Window.String()
		const timeout = 300 * time.Millisecond
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		start := time.Now()
		_, err := l.Allow(ctx, "merchant:"+name)
		took := time.Since(start)
		cancel()
		require.Error(t, err, name)
		require.Less(t, took, timeout+50*time.Millisecond, name)

		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(timeout, cancel)
		start = time.Now()
		_, err = l.Allow(ctx, "merchant:"+name)
		took = time.Since(start)
		require.Error(t, err, name)
		require.Less(t, took, timeout+50*time.Millisecond, name)
		t.Logf("%s: returned %v after the cancel", name, took-timeout)
	}
}

// Lost replies under ordinary load (50% of the limit, 4 instances, a reply dropped every
// 40ms): with go-redis's default retries (MaxRetries 3) and with the options the package doc
// recommends for the modes that resend by request ID (MaxRetries -1), every request is
// answered, none is denied, and none fails. (go-redis's retry backoff used to hold a key's
// one round trip per instance for up to 512ms, cutting Leased throughput from about 340 to
// 69–108 admitted per second.)
func TestLostRepliesUnderOrdinaryLoadDenyNothing(t *testing.T) {
	celebritytest.Long(t)
	const rate = 5000
	for _, mode := range []Mode{Leased, Approximate} {
		for _, retries := range []int{3, -1} {
			t.Run(fmt.Sprintf("%v/MaxRetries=%d", mode, retries), func(t *testing.T) {
				srv := celebritytest.Standalone(t)
				inj := faults.New()
				o := Options{Limit: Limit{Rate: rate, Period: time.Second}, Mode: mode, Prefix: celebritytest.NewPrefix(t)}
				lims := instances(t, 4, faultyClients(t, srv.Client(t), inj, retries), o, nil)
				key := "merchant:lossy"
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					tick := time.NewTicker(40 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							inj.DropReply(faults.Match{Command: "EVALSHA", Arg: key}, 1)
						}
					}
				}()
				tl := paced(lims, key, rate/2, 4, 2*time.Second, 2*time.Second)
				close(stop)
				<-done
				t.Logf("%d replies dropped: %d admitted, %d denied, %d failed", inj.Dropped(), tl.allowed.Load(), tl.denied.Load(), tl.errs.Load())
				if p := tl.firstErr.Load(); p != nil {
					t.Logf("first error: %v", *p)
				}
				require.Positive(t, inj.Dropped())
				require.Zero(t, tl.denied.Load())
				require.Zero(t, tl.errs.Load())
			})
		}
	}
}

// A caller whose ctx has already ended (an upstream deadline passed) must not break the key
// for the callers after it.
func TestACallerWhoseCtxEndedDoesNotBreakASlot(t *testing.T) {
	srv := celebritytest.Standalone(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	l := newLimiter(t, rc, Options{
		Limit: Limit{Rate: 1000, Period: time.Second},
		Mode:  Leased,
		Slots: 1,
	})
	dead, cancel := context.WithCancel(t.Context())
	cancel()
	for range 20 { // enter's select picks the free turn or the done ctx at random
		_, _ = l.Allow(dead, "k")
	}
	time.Sleep(300 * time.Millisecond) // past one sub-window (100ms) and SlotTimeout
	var errs, allowed int
	for range 50 {
		r, err := l.Allow(t.Context(), "k")
		if err != nil {
			errs++
			if errs == 1 {
				t.Logf("first error: %v", err)
			}
		} else if r.Allowed {
			allowed++
		}
	}
	require.Zero(t, errs, "calls with a live ctx failed after calls with a dead one")
	require.Equal(t, 50, allowed)
}

// A caller whose own deadline ends a new key's first sync must not hand its ctx error to a
// caller with a live ctx that waited for that sync.
func TestApproximateFirstSyncDoesNotHandOneCallersDeadlineToOthers(t *testing.T) {
	srv := celebritytest.Standalone(t)
	inj := faults.New()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: inj.Dialer(nil)})
	t.Cleanup(func() { _ = rc.Close() })
	require.NoError(t, rc.Ping(t.Context()).Err()) // a warm connection
	l := newLimiter(t, rc, Options{Limit: Limit{Rate: 100, Period: time.Second}, Mode: Approximate})
	inj.SetLatency(60 * time.Millisecond)
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	go func() { _, _ = l.Allow(short, "new-key") }()
	time.Sleep(5 * time.Millisecond)
	live, cancel2 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel2()
	start := time.Now()
	r, err := l.Allow(live, "new-key")
	t.Logf("live caller after %v: %+v, err %v (its ctx: %v)", time.Since(start), r, err, live.Err())
	require.NoError(t, err, "the live caller got another caller's ctx error")
	require.True(t, r.Allowed)
	time.Sleep(200 * time.Millisecond)
}
