package celebrity_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
)

// loopOptions are fast fleet-loop settings for tests: a key read by a few instances without
// pause is promoted within a few intervals and demoted half a second after the reads stop.
func loopOptions() celebrity.Options[string] {
	return celebrity.Options[string]{
		Fresh: 20 * time.Millisecond, Stale: -1,
		Loop: celebrity.LoopOptions{
			ReportInterval: 100 * time.Millisecond, PromoteRate: 100, DemoteRate: 10,
			Hold: 500 * time.Millisecond, SummaryShards: 4, ReportMinRate: 5,
		},
	}
}

// readerOptions are loopOptions for an instance whose key readers (below) read in a loop
// until the fleet promotes it by its rate. A reader reaches Redis once per Fresh at most, so
// at loopOptions' 20 ms two instances made at most exactly PromoteRate and four at most
// twice it, less on a slow machine; at 5 ms two instances make up to four times it.
func readerOptions() celebrity.Options[string] {
	o := loopOptions()
	o.Fresh = 5 * time.Millisecond
	return o
}

// recorder collects one instance's events.
type recorder struct {
	mu     sync.Mutex
	events []celebrity.Event
}

func (r *recorder) add(ev celebrity.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) count(kind celebrity.EventKind, key string) (n int, last celebrity.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Kind == kind && ev.Key == key {
			n++
			last = ev
		}
	}
	return n, last
}

// readers reads keys from every cache until stop is called; every value must be "v<n>".
func readers(t *testing.T, caches []*celebrity.Cache[string], keys ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range caches {
		for _, key := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					v, err := c.Get(ctx, key)
					if err == nil && !strings.HasPrefix(v, "v") {
						t.Errorf("Get %q = %q", key, v)
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// waitLeader waits until one of caches holds the fleet's leader lease and returns it.
func waitLeader(t *testing.T, caches []*celebrity.Cache[string]) (leader *celebrity.Cache[string]) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range caches {
			if c.Stats().Leader {
				leader = c
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "an instance takes the leader lease")
	return leader
}

func hotEverywhere(caches []*celebrity.Cache[string], key string, want bool) bool {
	for _, c := range caches {
		hot := false
		for _, k := range c.Hot() {
			hot = hot || k == key
		}
		if hot != want {
			return false
		}
	}
	return true
}

// TestFleetPromotesAndDemotesByRedisLoad: a key whose Redis-level reads cross PromoteRate only
// in the fleet's sum is promoted on every instance, spread over copies on a cluster, and
// demoted once the reads stop for Hold, exactly once per instance (no flaps).
func TestFleetPromotesAndDemotesByRedisLoad(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		hot, cold := p+"celebrity", p+"cold"
		src.bump(hot)
		src.bump(cold)
		var caches []*celebrity.Cache[string]
		recs := make([]*recorder, 5)
		for i := range recs {
			recs[i] = &recorder{}
			o := loopOptions()
			// One reader reaches Redis at most 1/Fresh ≈ 83 times a second, under
			// PromoteRate (100); the five up to 416, over three times it (at 20 ms, 250).
			o.Fresh = 12 * time.Millisecond
			o.OnEvent = recs[i].add
			caches = append(caches, newCache(t, d.client(t), src, p, o))
		}
		stop := readers(t, caches, hot)
		require.Eventually(t, func() bool { return hotEverywhere(caches, hot, true) }, 30*time.Second, 10*time.Millisecond)
		for i, r := range recs {
			n, ev := r.count(celebrity.EventPromoted, hot)
			require.Equal(t, 1, n, "instance %d", i)
			require.GreaterOrEqual(t, ev.Rate, 100.0, "the fleet-wide rate that decided it")
			require.False(t, ev.Manual)
		}
		_, err := caches[0].Get(t.Context(), cold)
		require.NoError(t, err)
		if d.cluster {
			require.Eventually(t, func() bool {
				var copies uint64
				for _, c := range caches {
					for _, n := range c.Stats().Replicas.CopyReads {
						copies += n
					}
				}
				return copies > 0
			}, 30*time.Second, 10*time.Millisecond, "hot reads go to the copies")
		}
		stop()
		require.Eventually(t, func() bool { return hotEverywhere(caches, hot, false) }, 30*time.Second, 10*time.Millisecond)
		for i, r := range recs {
			n, ev := r.count(celebrity.EventDemoted, hot)
			require.Equal(t, 1, n, "instance %d", i)
			require.Less(t, ev.Rate, 10.0)
			n, _ = r.count(celebrity.EventPromoted, hot)
			require.Equal(t, 1, n, "instance %d: no flap", i)
			n, _ = r.count(celebrity.EventPromoted, cold)
			require.Zero(t, n)
		}
		var leaders int
		for _, c := range caches {
			if c.Stats().Leader {
				leaders++
			}
		}
		require.LessOrEqual(t, leaders, 1)
	})
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestManualPromoteOnStandalone: Promote reaches every instance; on a standalone server
// replication is off (logged once per instance) and the rest works.
func TestManualPromoteOnStandalone(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key := p + "launch"
	src.bump(key)
	var logs syncBuffer
	var caches []*celebrity.Cache[string]
	for range 3 {
		o := loopOptions()
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		caches = append(caches, newCache(t, srv.Client(t), src, p, o))
	}
	require.NoError(t, caches[0].Promote(t.Context(), key))
	require.NoError(t, caches[0].Promote(t.Context(), key), "idempotent")
	require.Equal(t, []string{key}, caches[0].Hot(), "applied before Promote returns")
	require.Eventually(t, func() bool { return hotEverywhere(caches, key, true) }, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, caches[1].Promote(t.Context(), p+"second"))
	require.Eventually(t, func() bool { return hotEverywhere(caches, p+"second", true) }, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, 3, strings.Count(logs.String(), "hot keys are not replicated"), "once per instance")
	for _, c := range caches {
		v, err := c.Get(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, "v1", v)
		require.Zero(t, c.Stats().Replicas.Promotions, "no copies on a standalone server")
	}
	// A manual member is not demoted by the fleet, however cold: the leader evaluates three
	// times the whole intervals that demote a fleet-decided member cold for Hold.
	o := loopOptions()
	need := 3 * uint64(o.Loop.Hold/o.Loop.ReportInterval+1)
	from := fullEvaluations(caches)
	require.Eventually(t, func() bool { return fullEvaluations(caches) >= from+need }, 30*time.Second, 10*time.Millisecond)
	require.True(t, hotEverywhere(caches, key, true))
	require.NoError(t, caches[2].Demote(t.Context(), key))
	require.Eventually(t, func() bool { return hotEverywhere(caches, key, false) }, 30*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 3, caches[0].Stats().HotVersion, "three changes, each counted once")
}

// fullEvaluations sums the instances' evaluations of whole intervals (whichever led).
func fullEvaluations(caches []*celebrity.Cache[string]) uint64 {
	var n uint64
	for _, c := range caches {
		n += c.Stats().FullEvaluations
	}
	return n
}

// TestLeaderLostMidPromotion: the leader's promotion is applied in Redis but its reply is lost
// and the leader dies before announcing it. The hot set stays consistent (one member, one
// version), the survivors learn it by polling, one of them takes over and later demotes it.
func TestLeaderLostMidPromotion(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key := p + "celebrity"
	src.bump(key)
	inj := faults.New()
	leaderClient := cl.Client(t, func(o *redis.ClusterOptions) { o.Dialer = inj.Dialer(nil) })
	leader := newCache(t, leaderClient, src, p, readerOptions())
	require.Eventually(t, func() bool { return leader.Stats().Leader }, 30*time.Second, 10*time.Millisecond)
	var others []*celebrity.Cache[string]
	for range 3 {
		others = append(others, newCache(t, cl.Client(t), src, p, readerOptions()))
	}
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "}members"}, 1)
	stop := readers(t, append([]*celebrity.Cache[string]{leader}, others...), key)
	defer stop()
	require.Eventually(t, func() bool { return inj.Dropped() == 1 }, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, leader.Close()) // killed right after its promotion was applied

	require.Eventually(t, func() bool { return hotEverywhere(others, key, true) }, 30*time.Second, 10*time.Millisecond)
	rdb := cl.Client(t)
	tag := "{" + p + "cache:hot}"
	_ = tag
	waitLeader(t, others) // a survivor takes over the lease
	members, err := rdb.HGetAll(t.Context(), p+"{"+p+"hot}members").Result()
	require.NoError(t, err)
	require.Len(t, members, 1)
	require.Contains(t, members, key)
	version, err := rdb.HGet(t.Context(), p+"{"+p+"hot}meta", "version").Uint64()
	require.NoError(t, err)
	require.EqualValues(t, 1, version, "the lost reply was not applied twice")
	stop()
	require.Eventually(t, func() bool { return hotEverywhere(others, key, false) }, 30*time.Second, 10*time.Millisecond)
	version, err = rdb.HGet(t.Context(), p+"{"+p+"hot}meta", "version").Uint64()
	require.NoError(t, err)
	require.EqualValues(t, 2, version)
}

// TestFailoverDuringTheLoop: the master of a promoted key fails over while instances read and
// write it; every value read is one that was written, writes retried with their version
// complete, and every instance ends on the last version.
func TestFailoverDuringTheLoop(t *testing.T) {
	celebritytest.Long(t)
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Replicas: true})
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key := p + "celebrity"
	src.bump(key)
	var caches []*celebrity.Cache[string]
	for range 3 {
		o := loopOptions()
		o.Fresh = time.Hour // only the write order brings new versions
		caches = append(caches, newCache(t, cl.Client(t), src, p, o))
	}
	ctx := t.Context()
	require.NoError(t, caches[0].Promote(ctx, key))
	require.Eventually(t, func() bool { return hotEverywhere(caches, key, true) }, 30*time.Second, 10*time.Millisecond)
	stop := readers(t, caches, key)
	defer stop()
	var writes atomic.Int64
	write := func(i int) uint64 {
		version := src.bump(key)
		require.Eventually(t, func() bool {
			return caches[i%len(caches)].Set(ctx, key, "v"+itoa(version), version) == nil
		}, 30*time.Second, 50*time.Millisecond, "retrying v%d", version)
		writes.Add(1)
		return version
	}
	for i := range 5 {
		write(i)
	}
	owner := -1
	for i, m := range cl.Masters() {
		if m == cl.MasterOf(key) {
			owner = i
		}
	}
	require.GreaterOrEqual(t, owner, 0)
	cl.Failover(t, owner)
	var last uint64
	for i := range 5 {
		last = write(i)
	}
	for i, c := range caches {
		require.Eventually(t, func() bool {
			v, err := c.Get(ctx, key)
			return err == nil && v == "v"+itoa(last)
		}, 30*time.Second, 10*time.Millisecond, "instance %d", i)
	}
}

// TestCutOffInstanceServesStaleAndRejoins: an instance whose connections to Redis are
// blackholed serves its last good value (StaleIfError) instead of failing, and once the
// network is back it learns the write it missed.
func TestCutOffInstanceServesStaleAndRejoins(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		key := p + "post"
		src.bump(key)
		o := loopOptions()
		o.Fresh, o.StaleIfError, o.LoadTimeout = 50*time.Millisecond, time.Hour, 300*time.Millisecond
		inj := faults.New()
		var client redis.UniversalClient
		if d.cluster {
			client = celebritytest.SharedCluster(t).Client(t, func(co *redis.ClusterOptions) {
				co.Dialer = inj.Dialer(nil)
				co.ReadTimeout, co.WriteTimeout, co.DialTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
				co.MaxRetries, co.MaxRedirects = -1, -1
			})
		} else {
			client = celebritytest.Standalone(t).Client(t, func(ro *redis.Options) {
				ro.Dialer = inj.Dialer(nil)
				ro.ReadTimeout, ro.WriteTimeout, ro.DialTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
				ro.MaxRetries = -1
			})
		}
		cut := newCache(t, client, src, p, o)
		writer := newCache(t, d.client(t), src, p, o)
		v, err := cut.Get(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, "v1", v)

		inj.Blackhole(true)
		version := src.bump(key)
		require.NoError(t, writer.Set(t.Context(), key, "v"+itoa(version), version))
		for range 10 {
			v, err := cut.Get(t.Context(), key)
			require.NoError(t, err, "served within StaleIfError")
			require.Equal(t, "v1", v)
			time.Sleep(50 * time.Millisecond)
		}
		require.Positive(t, cut.Stats().L1.StaleIfErrorHits)
		inj.Blackhole(false)
		inj.ResetAll()
		require.Eventually(t, func() bool {
			v, err := cut.Get(t.Context(), key)
			return err == nil && v == "v2"
		}, 30*time.Second, 20*time.Millisecond, "rejoins and serves the write it missed")
	})
}

func itoa(n uint64) string { return strconvU(n) }
