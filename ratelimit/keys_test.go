package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// switchHot is a hot-key detector whose hot set the test sets.
type switchHot struct {
	mu  sync.Mutex
	hot []string
}

func (s *switchHot) Observe(string) {}
func (s *switchHot) Hot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hot...)
}
func (s *switchHot) set(keys ...string) {
	s.mu.Lock()
	s.hot = keys
	s.mu.Unlock()
}

// With a hot-key detector only hot keys hold chunks; cold keys pay one call per request.
// Both draw on the same budget slots, so a key turning hot keeps what it already spent.
func TestHotKeysDecideWhoLeases(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		det := &switchHot{}
		l := newLimiter(t, c, Options{Limit: Limit{Rate: 90, Period: time.Minute}, Mode: Leased,
			HotKeys: det, HotRefresh: time.Nanosecond, MaxChunk: 10})
		ctx := t.Context()
		admit := func(key string, n int) (allowed int) {
			for range n {
				r, err := l.Allow(ctx, key)
				require.NoError(t, err)
				if r.Allowed {
					allowed++
				}
			}
			return allowed
		}
		require.Equal(t, 60, admit("merchant:7", 60))
		st := l.Stats()
		require.Equal(t, uint64(60), st.Calls, "a cold key: one call per request")
		require.Zero(t, st.Chunks)

		det.set("merchant:7")
		require.Equal(t, 30, admit("merchant:7", 100), "the hot key gets only what is left of its limit")
		st = l.Stats()
		require.Positive(t, st.Chunks)
		require.Less(t, st.Calls-60, uint64(30), "a hot key leases: fewer calls than requests")
	})
}

// Local state is bounded by MaxKeys and dropped after KeyIdle.
func TestQuietKeysAreDropped(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	for _, mode := range []Mode{Leased, Approximate} {
		t.Run(mode.String(), func(t *testing.T) {
			l := newLimiter(t, c, Options{Limit: Limit{Rate: 10, Period: time.Second}, Mode: mode,
				MaxKeys: 50, KeyIdle: 200 * time.Millisecond})
			ctx := t.Context()
			for i := range 500 {
				_, err := l.Allow(ctx, "user:"+itoa(int64(i)))
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool {
				l.states.CleanUp()
				return l.Stats().Keys <= 50
			}, 30*time.Second, 10*time.Millisecond, "at most MaxKeys keys")
			require.Eventually(t, func() bool {
				l.states.CleanUp()
				return l.Stats().Keys == 0
			}, 30*time.Second, 10*time.Millisecond, "quiet keys are dropped")
		})
	}
}

// An instance that sees one request holds a one-cell chunk; a busy one asks for more.
func TestChunksFollowEachInstancesRate(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	o := Options{Limit: Limit{Rate: 1 << 20, Period: time.Second}, Mode: Leased, Prefix: celebritytest.NewPrefix(t)}
	idle, busy := newLimiter(t, c, o), newLimiter(t, c, o)
	ctx := t.Context()
	_, err := idle.Allow(ctx, "k")
	require.NoError(t, err)
	// Each chunk the idle instance took is its request's cost. (A grant whose reply arrives
	// after its sub-window ended is dropped and the next slot asked, so a loaded machine can
	// make it take two one-cell chunks.)
	ist := idle.Stats()
	require.Positive(t, ist.Chunks)
	require.Equal(t, ist.Chunks, ist.Cells, "an idle instance takes its request's cost")
	hammer(ctx, []*Limiter{busy}, "k", 2, 300*time.Millisecond, nil)
	st := busy.Stats()
	require.Greater(t, st.Cells/st.Chunks, uint64(1), "a busy instance takes bigger chunks")
	require.Less(t, st.Calls*20, st.Allowed, "and makes far fewer calls than admissions")
	t.Logf("busy: %d admitted with %d calls, %d chunks of %.1f cells on average", st.Allowed, st.Calls, st.Chunks, float64(st.Cells)/float64(st.Chunks))
}

// The slots of one key sit on distinct masters of the 3-master cluster.
func TestLeasedSlotsSpreadOverMasters(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	l := newLimiter(t, cl.Client(t), Options{Limit: Limit{Rate: 100, Period: time.Second}, Mode: Leased, Slots: 3})
	for i := range 200 {
		key := "merchant:" + itoa(int64(i))
		seen := map[string]bool{}
		for j := range 3 {
			seen[cl.MasterOf(SlotKey(l, key, j)).Addr()] = true
		}
		require.Len(t, seen, 3, "key %q", key)
	}
}

// Under-admission is bounded by construction: the cells granted in a Fixed window but not
// admitted in it (chunks left when it ends) are at most N·MaxChunk, whatever the demand.
func TestLeasedUnderAdmissionIsBounded(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		const n, maxChunk, rate = 10, 3, 120
		var a admissions
		var mu sync.Mutex
		granted := map[int64]int64{}
		o := Options{Limit: Limit{Rate: rate, Period: fleetPeriod}, Mode: Leased, Window: Fixed, MaxChunk: maxChunk}
		lims := instances(t, n, clients(t, c), o, &a)
		for _, l := range lims {
			SetGrantHook(l, func(ms, cells int64) {
				mu.Lock()
				granted[ms/fleetPeriod.Milliseconds()] += cells
				mu.Unlock()
			})
		}
		require.Zero(t, hammer(context.Background(), lims, "k", fleetWorkers, 4*fleetPeriod, nil))
		admitted := a.perSub(fleetPeriod.Milliseconds())
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, granted)
		for w, g := range granted {
			require.LessOrEqual(t, g, int64(rate), "window %d: granted", w)
			require.LessOrEqual(t, admitted[w], g, "window %d: admitted beyond the grants", w)
			require.LessOrEqual(t, g-admitted[w], int64(n*maxChunk), "window %d: unused cells", w)
		}
		t.Logf("granted per window %v, admitted %v", granted, admitted)
	})
}
