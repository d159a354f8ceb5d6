package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// faultyClients returns a constructor of separate clients of c's deployment whose
// connections go through inj; maxRetries < 0 turns go-redis's own retries off.
func faultyClients(t testing.TB, c redis.UniversalClient, inj *faults.Injector, maxRetries int) func() Client {
	t.Helper()
	switch c := c.(type) {
	case *redis.ClusterClient:
		addrs := c.Options().Addrs
		return func() Client {
			o := &redis.ClusterOptions{Addrs: addrs, Dialer: inj.Dialer(nil), MaxRetries: maxRetries}
			if maxRetries < 0 {
				o.MaxRedirects = -1
			}
			cc := redis.NewClusterClient(o)
			t.Cleanup(func() { _ = cc.Close() })
			return cc
		}
	default:
		addr := c.(*redis.Client).Options().Addr
		return func() Client {
			rc := redis.NewClient(&redis.Options{Addr: addr, Dialer: inj.Dialer(nil), MaxRetries: maxRetries})
			t.Cleanup(func() { _ = rc.Close() })
			return rc
		}
	}
}

// grantedOnServer reads every sub-window hash of key's budget slots and returns the cells
// they granted and each request ID's grant.
func grantedOnServer(t testing.TB, c redis.UniversalClient, l *Limiter, key string) (int64, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	c = celebritytest.AdminOf(t, c) // KEYS is not in the package's rule
	var total int64
	byID := map[string]int64{}
	for j := range l.o.Slots {
		base := SlotKey(l, key, j)
		var node redis.Cmdable = c
		if cc, ok := c.(*redis.ClusterClient); ok {
			m, err := cc.MasterForKey(ctx, base)
			require.NoError(t, err)
			node = m
		}
		keys, err := node.Keys(ctx, base+":*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			fields, err := node.HGetAll(ctx, k).Result()
			require.NoError(t, err)
			for f, v := range fields {
				n, err := strconv.ParseInt(v, 10, 64)
				require.NoError(t, err)
				if f == "n" {
					total += n
				} else if id, ok := strings.CutPrefix(f, "r:"); ok {
					byID[id] = n
				}
			}
		}
	}
	return total, byID
}

// abandoned records the chunk requests limiters gave up on (every attempt failed).
type abandoned struct {
	mu  sync.Mutex
	ids []string
}

// watch makes l report its abandoned requests to a.
func (a *abandoned) watch(l *Limiter) {
	SetAbandonHook(l, func(_ int, id string) {
		a.mu.Lock()
		a.ids = append(a.ids, id)
		a.mu.Unlock()
	})
}

// cells returns the cells the server granted to the abandoned requests: granted, since the
// request ran, but never received, since no reply to it arrived.
func (a *abandoned) cells(byID map[string]int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	for _, id := range a.ids {
		n += byID[id]
	}
	return n
}

// requireGrantsReceived checks that the cells the server granted for key are exactly the
// cells the instances received plus those granted to requests they abandoned, and that
// every grant on the server matches one request ID.
func requireGrantsReceived(t testing.TB, c redis.UniversalClient, lims []*Limiter, key string, ab *abandoned) (received, lost int64) {
	t.Helper()
	for _, l := range lims {
		received += int64(l.Stats().Cells)
	}
	total, byID := grantedOnServer(t, c, lims[0], key)
	var perID int64
	for _, n := range byID {
		perID += n
	}
	require.Equal(t, total, perID, "every cell the server granted belongs to one request ID")
	lost = ab.cells(byID)
	require.Equal(t, total, received+lost, "cells granted on the server vs received (+%d granted to abandoned requests)", lost)
	return received, lost
}

// A chunk request whose reply is lost after take.lua ran is sent again with the same
// request ID, by go-redis or by the limiter, and answered with the original grant: the
// cells the server granted equal the cells the instances received, and no window is
// exceeded.
func TestLeasedLostRepliesNeverGrantTwice(t *testing.T) {
	for _, retries := range []struct {
		name       string
		maxRetries int
	}{{"go-redis retries", 3}, {"limiter retries", -1}} {
		t.Run(retries.name, func(t *testing.T) {
			celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
				inj := faults.New()
				var a admissions
				// A long window with a big budget: no sub-window hash expires during the
				// test, so the server's sum is every cell it ever granted.
				o := Options{Limit: Limit{Rate: 1 << 30, Period: time.Minute}, Mode: Leased, Attempts: 5, MaxChunk: 50}
				lims := instances(t, 5, faultyClients(t, c, inj, retries.maxRetries), o, &a)
				var ab abandoned
				for _, l := range lims {
					ab.watch(l)
				}
				key := "merchant:lost"
				stop := make(chan struct{})
				done := make(chan int64)
				go func() { done <- hammer(context.Background(), lims, key, fleetWorkers, time.Minute, stop) }()
				chunks := func() (n uint64) {
					for _, l := range lims {
						n += l.Stats().Chunks
					}
					return n
				}
				const drops = 8
				for i := range drops {
					inj.DropReply(faults.Match{Command: "EVALSHA", Arg: ":" + key + ":"}, 1)
					require.Eventually(t, func() bool { return inj.Dropped() == int64(i+1) }, 30*time.Second, time.Millisecond)
					before := chunks()
					require.Eventually(t, func() bool { return chunks() >= before+5 }, 30*time.Second, time.Millisecond)
				}
				close(stop)
				require.Zero(t, <-done, "every lost reply was answered by a retry")
				received, lost := requireGrantsReceived(t, c, lims, key, &ab)
				require.LessOrEqual(t, int64(a.total()), received)
				t.Logf("%d replies dropped, %d cells received, %d granted to abandoned requests, %d admitted", inj.Dropped(), received, lost, a.total())
			})
		})
	}
}

// A chunk request whose every attempt lost its reply ran on the server, but the instance
// gave up on it and took its chunk from the next slot without an error: the grant is
// neither received nor spent (under-admission), and it is the only gap between the cells
// granted on the server and those received.
func TestLeasedAbandonedGrantIsTheOnlyGap(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		inj := faults.New()
		o := Options{Limit: Limit{Rate: 1 << 30, Period: time.Minute}, Mode: Leased, Attempts: 2, MaxChunk: 50}
		var ab abandoned
		l := instances(t, 1, faultyClients(t, c, inj, -1), o, nil)[0]
		ab.watch(l)
		key := "merchant:abandoned"
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: ":" + key + ":"}, o.Attempts)
		r, err := l.Allow(context.Background(), key)
		require.NoError(t, err, "the next slot answered")
		require.True(t, r.Allowed)
		require.Equal(t, int64(o.Attempts), inj.Dropped())
		require.Len(t, ab.ids, 1)
		received, lost := requireGrantsReceived(t, c, []*Limiter{l}, key, &ab)
		require.Equal(t, int64(1), lost, "the first request, of its cost, ran and was granted")
		require.Equal(t, int64(1), received)
	})
}

// Lost replies in Exact and Approximate modes: Exact may count a retried request twice
// (GCRA) but never admits beyond the window; Approximate's syncs are applied once per
// sequence number, so the bound holds.
func TestLostRepliesKeepEveryModeWithinItsBound(t *testing.T) {
	celebritytest.Long(t)
	for _, mode := range []Mode{Exact, Approximate} {
		t.Run(mode.String(), func(t *testing.T) {
			celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
				inj := faults.New()
				var a admissions
				o := Options{Limit: Limit{Rate: fleetRate, Period: fleetPeriod}, Mode: mode, Window: Sliding}
				lims := instances(t, 10, faultyClients(t, c, inj, 3), o, &a)
				inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "merchant:lost"}, 20)
				errs := hammer(t.Context(), lims, "merchant:lost", fleetWorkers, fleetRun, nil)
				require.Positive(t, inj.Dropped())
				bound := int64(fleetRate)
				if mode == Approximate {
					bound += int64(len(lims)-1) * lims[0].o.MaxUnsynced
				}
				worst := a.worstWindow(SubMs(lims[0]), lims[0].o.span())
				require.LessOrEqual(t, worst, bound)
				t.Logf("%d replies dropped, %d errors, worst window %d, bound %d", inj.Dropped(), errs, worst, bound)
			})
		})
	}
}

// holdHook holds back the reply of the first take.lua call that ran on the server, until
// release is closed: an instance paused (SIGSTOP, a long GC) while its grant is in flight.
type holdHook struct {
	armed    atomic.Bool
	held     chan struct{}
	release  chan struct{}
	heldOnce sync.Once
}

func (h *holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		name := strings.ToLower(cmd.Name())
		if (name == "evalsha" || name == "eval") && err == nil && h.armed.CompareAndSwap(true, false) {
			h.heldOnce.Do(func() { close(h.held) })
			<-h.release
		}
		return err
	}
}

// An instance whose chunk grant is held back past its sub-window (a paused process) must
// not spend the chunk when it wakes: the chunk's deadline is measured from the moment the
// request was sent, so it has passed. Meanwhile the rest of the fleet spends the windows
// to the limit.
func TestLeasedHeldBackGrantIsNotSpentLate(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		var a admissions
		// One slot: when the late grant is dropped there is no other slot to fall back on,
		// so the woken request itself must be denied.
		// The test is about the late grant, not slow masters: a loaded machine's round trips
		// may pass the default SlotTimeout (250ms), and the hammer would count those errors.
		o := Options{Limit: Limit{Rate: fleetRate, Period: fleetPeriod}, Mode: Leased, Slots: 1, Prefix: celebritytest.NewPrefix(t),
			SlotTimeout: 5 * time.Second}
		mk := clients(t, c)
		hook := &holdHook{held: make(chan struct{}), release: make(chan struct{})}
		pausedClient := mk()
		pausedClient.(redis.UniversalClient).AddHook(hook)
		paused := newLimiter(t, pausedClient, o)
		a.watch(paused)
		others := instances(t, fleetSize-1, mk, o, &a)
		key := "merchant:paused"
		cost := paused.o.budget(0) / 2 // a big chunk, so a late spend would show

		hook.armed.Store(true)
		first := make(chan Result, 1)
		go func() {
			r, _ := paused.AllowN(context.Background(), key, cost)
			first <- r
		}()
		<-hook.held // granted on the server, reply not delivered
		heldAt := time.Now()
		stop := make(chan struct{})
		done := make(chan int64)
		go func() { done <- hammer(context.Background(), others, key, fleetWorkers, time.Minute, stop) }()
		time.Sleep(2 * fleetPeriod) // the grant's sub-window is long over
		close(hook.release)
		r := <-first
		// The paused instance keeps asking along with the others for another window.
		go func() {
			done <- hammer(context.Background(), []*Limiter{paused}, key, fleetWorkers, 2*fleetPeriod, stop)
		}()
		require.Zero(t, <-done)
		close(stop)
		require.Zero(t, <-done)
		require.False(t, r.Allowed, "a grant that arrived %v late must not be spent", time.Since(heldAt))
		require.Positive(t, paused.Stats().LateGrants, "the held grant arrived after its sub-window and was dropped")
		worst := a.worstWindow(SubMs(paused), paused.o.span())
		require.LessOrEqual(t, worst, int64(fleetRate))
		t.Logf("worst window %d/%d", worst, fleetRate)
	})
}

// A master failover between two bursts of load (CLUSTER FAILOVER: the replica takes over
// with every acknowledged write) never lets a window exceed the limit: the budget slots'
// counts, and the chunks instances hold, carry across the switch. The load pauses for the
// switch itself because go-redis v9.23.0's concurrent cluster-state reload is a data race
// under the race detector (clusterNodes.GetOrCreateWithNodeAddress); the windows around
// the switch still hold admissions from both sides of it.
func TestFailoverKeepsTheLimit(t *testing.T) {
	celebritytest.Long(t)
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Replicas: true})
	c := cl.Client(t)
	for _, mode := range []Mode{Exact, Leased} {
		t.Run(mode.String(), func(t *testing.T) {
			var a admissions
			o := Options{Limit: Limit{Rate: fleetRate, Period: fleetPeriod}, Mode: mode, Window: Sliding}
			var ccs []*redis.ClusterClient
			lims := instances(t, fleetSize, func() Client {
				cc := cl.Client(t)
				ccs = append(ccs, cc)
				return cc
			}, o, &a)
			key := "merchant:failover"
			addr := cl.MasterOf(SlotKey(lims[0], key, 0)).Addr()
			victim := -1
			for i, m := range cl.Masters() {
				if m.Addr() == addr {
					victim = i
				}
			}
			require.GreaterOrEqual(t, victim, 0)
			// Before the switch: a call may fail by its SlotTimeout on a loaded machine (the
			// leased path's first chunks), not by the limit; most succeed.
			before := hammer(t.Context(), lims, key, fleetWorkers, fleetPeriod*3/2, nil)
			require.LessOrEqual(t, before, int64(a.total()/20), "calls failed before the switch (of %d admitted)", a.total())
			cl.Failover(t, victim)
			require.NotEqual(t, addr, cl.MasterOf(SlotKey(lims[0], key, 0)).Addr())
			for _, cc := range ccs {
				cc.ReloadState(t.Context())
			}
			c.ReloadState(t.Context())
			errs := hammer(t.Context(), lims, key, fleetWorkers, fleetPeriod*3/2, nil)
			worst := a.worstWindow(SubMs(lims[0]), lims[0].o.span())
			require.LessOrEqual(t, worst, int64(fleetRate))
			t.Logf("%d admitted, %d errors after the switch, worst window %d/%d", a.total(), errs, worst, fleetRate)
		})
	}
}

// A master holding one budget slot is stopped (SIGSTOP) under load: the instances skip
// its slot and keep admitting from the others, never beyond the limit; when it resumes, the
// commands it had queued run late, and their grants are never spent.
func TestLeasedRidesOutAStoppedMaster(t *testing.T) {
	celebritytest.Long(t)
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{})
	var a admissions
	o := Options{Limit: Limit{Rate: fleetRate, Period: fleetPeriod}, Mode: Leased, Slots: 3, Attempts: 1}
	lims := instances(t, 5, func() Client {
		return cl.Client(t, func(o *redis.ClusterOptions) {
			o.ReadTimeout, o.WriteTimeout, o.MaxRetries = 200*time.Millisecond, 200*time.Millisecond, -1
		})
	}, o, &a)
	key := "merchant:stopped"
	victim := cl.MasterOf(SlotKey(lims[0], key, 0))
	victim.Pause()
	t.Cleanup(func() {
		if victim.Paused() {
			victim.Resume()
		}
	})
	errs := hammer(context.Background(), lims, key, fleetWorkers, 3*fleetPeriod, nil)
	during := a.total()
	victim.Resume()
	errs += hammer(context.Background(), lims, key, fleetWorkers, 2*fleetPeriod, nil)
	require.Positive(t, during, "the other slots kept serving")
	worst := a.worstWindow(SubMs(lims[0]), lims[0].o.span())
	require.LessOrEqual(t, worst, int64(fleetRate))
	t.Logf("%d admitted while stopped, %d in all, %d errors, worst window %d/%d", during, a.total(), errs, worst, fleetRate)
}

// An Approximate limiter whose syncs fail (every reply lost, go-redis retries off) decides
// on its last estimate, as between syncs, rather than failing its callers: it admits until
// its unsynced admissions reach MaxUnsynced, and only then does a request get the error.
// Once Redis answers again, the counts of the failed syncs reach the shared count once each.
func TestApproximateDecidesOnItsEstimateWhileASyncFails(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		inj := faults.New()
		o := Options{Limit: Limit{Rate: 1000, Period: time.Minute}, Mode: Approximate, MaxUnsynced: 10,
			SyncInterval: time.Millisecond, Prefix: celebritytest.NewPrefix(t)}
		l := newLimiter(t, faultyClients(t, c, inj, -1)(), o)
		key := "merchant:outage"
		r, err := l.Allow(t.Context(), key)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		require.Equal(t, uint64(1), l.Stats().Syncs, "the key's first sync")

		inj.DropReply(faults.Match{Command: "EVALSHA"}, 1_000_000)
		inj.DropReply(faults.Match{Command: "EVAL"}, 1_000_000)
		admitted := 1
		for {
			time.Sleep(2 * time.Millisecond) // every request is due for a sync
			r, err = l.Allow(t.Context(), key)
			if err != nil {
				break
			}
			require.True(t, r.Allowed, "within Rate and MaxUnsynced: %+v", r)
			admitted++
		}
		require.ErrorContains(t, err, "sync")
		require.Equal(t, int(o.MaxUnsynced), admitted, "admitted until the unsynced admissions reached MaxUnsynced")
		require.Positive(t, l.Stats().SyncErrors)
		require.Positive(t, inj.Dropped())

		inj.Clear()
		for l.Stats().Syncs < 3 { // the failed sync, sent again unchanged, then the rest
			time.Sleep(2 * time.Millisecond)
			r, err = l.Allow(t.Context(), key)
			require.NoError(t, err)
			require.True(t, r.Allowed)
			admitted++
		}
		// Each request synced before it was admitted: all but the last are in Redis.
		u, err := l.Peek(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, int64(admitted-1), u.Used, "every admission counted once")
	})
}
