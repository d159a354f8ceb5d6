package replicas_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// fleetOf returns n instances under one prefix, each with its own client.
func fleetOf(t *testing.T, f fleet, n int, o replicas.Options) []*replicas.Replicator {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = celebritytest.NewPrefix(t)
	}
	out := make([]*replicas.Replicator, n)
	for i := range out {
		out[i] = newReplicator(t, f.client(t), o)
	}
	return out
}

// everyoneAsks has every instance call GetOrLoad rounds times, all at once, and returns the
// errors.
func everyoneAsks(t *testing.T, reps []*replicas.Replicator, key string, rounds int, load replicas.Loader) []error {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, r := range reps {
		wg.Go(func() {
			for range rounds {
				_, err := r.GetOrLoad(testkit.Ctx(t), key, time.Minute, load)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// TestMissingKeyLoadsOncePerWindowAcrossTheFleet: 20 instances asking for a key the source
// does not have reach the source once per NegativeTTL, not once per instance and call.
func TestMissingKeyLoadsOncePerWindowAcrossTheFleet(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "post:deleted"
		reps := fleetOf(t, f, 20, replicas.Options{NegativeTTL: time.Minute, Hot: []string{key}})
		var loads atomic.Int64
		absent := func(context.Context, string) (replicas.Item, error) {
			loads.Add(1)
			time.Sleep(20 * time.Millisecond)
			return replicas.Item{}, replicas.ErrNotFound
		}
		for _, err := range everyoneAsks(t, reps, key, 5, absent) {
			require.ErrorIs(t, err, replicas.ErrNotFound)
		}
		require.Equal(t, int64(1), loads.Load(), "one source load for the fleet in the window")
		var negative uint64
		for _, r := range reps {
			negative += r.Stats().NegativeHits
		}
		require.Positive(t, negative)
		// A Set ends the window at once.
		require.NoError(t, reps[0].Set(testkit.Ctx(t), key, []byte("back"), 2, time.Minute))
		it, err := reps[7].GetOrLoad(testkit.Ctx(t), key, time.Minute, absent)
		require.NoError(t, err)
		require.Equal(t, "back", string(it.Value))
		require.Equal(t, int64(1), loads.Load())
	})
}

// TestFailingSourceLoadsOncePerWindowAcrossTheFleet: with the source down, 20 instances
// reach it once per ErrorTTL and all report its error.
func TestFailingSourceLoadsOncePerWindowAcrossTheFleet(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "post:1"
		reps := fleetOf(t, f, 20, replicas.Options{ErrorTTL: time.Minute})
		var loads atomic.Int64
		down := func(context.Context, string) (replicas.Item, error) {
			loads.Add(1)
			time.Sleep(20 * time.Millisecond)
			return replicas.Item{}, errors.New("database: connection refused")
		}
		for _, err := range everyoneAsks(t, reps, key, 5, down) {
			require.ErrorIs(t, err, replicas.ErrLoadFailed)
			require.ErrorContains(t, err, "database: connection refused")
		}
		require.Equal(t, int64(1), loads.Load(), "one source load for the fleet in the window")
	})
}

// TestWaitersWakeWhenTheFillLands: instances waiting for another's fill block until it
// lands instead of polling: each looks at the lease about twice, plus once per maxBlock
// (1 s, the longest single BLPOP) the load kept it waiting, however long the load.
func TestWaitersWakeWhenTheFillLands(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "post:viral"
		prefix := celebritytest.NewPrefix(t)
		const n = 10
		counters := make([]*leaseChecks, n)
		reps := make([]*replicas.Replicator, n)
		for i := range reps {
			counters[i] = &leaseChecks{}
			reps[i] = newReplicator(t, hooked(t, f, counters[i]), replicas.Options{Prefix: prefix, LeaseTTL: 10 * time.Second})
		}
		started, release := make(chan struct{}), make(chan struct{})
		var calls atomic.Int64
		load := stuckLoader(started, release, replicas.Item{Value: []byte("x"), Version: 1}, replicas.Item{}, &calls)
		holderDone := make(chan error, 1)
		go func() {
			_, err := reps[0].GetOrLoad(testkit.Ctx(t), key, time.Minute, load)
			holderDone <- err
		}()
		<-started
		waitStart := time.Now()
		var wg sync.WaitGroup
		for _, r := range reps[1:] {
			wg.Go(func() {
				it, err := r.GetOrLoad(testkit.Ctx(t), key, time.Minute, load)
				assert.Truef(t, err == nil && string(it.Value) == "x", "waiter got %v %v", it, err)
			})
		}
		require.Eventually(t, func() bool {
			var waits uint64
			for _, r := range reps[1:] {
				waits += r.Stats().LeaseWaits
			}
			return waits == n-1
		}, 30*time.Second, 5*time.Millisecond)
		// The holder's load takes a long while; waiters do not look again meanwhile.
		time.Sleep(300 * time.Millisecond)
		held := time.Since(waitStart) // on a busy machine, the wait for LeaseWaits can be long
		close(release)
		require.NoError(t, <-holderDone)
		wg.Wait()
		require.Equal(t, int64(1), calls.Load())
		// A waiter polling every 100 ms would look at least 3 more times in the sleep alone.
		allowed := 4 + int64(held/time.Second)
		for i, c := range counters[1:] {
			require.LessOrEqual(t, c.n.Load(), allowed, "instance %d looked at the lease %d times while the load held it %v", i+1, c.n.Load(), held)
		}
	})
}

// leaseChecks counts the acquire scripts a client sends (EVALSHA naming a lease key).
type leaseChecks struct{ n atomic.Int64 }

func (h *leaseChecks) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *leaseChecks) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// A lease check is the plain "SET <primary> l2,... NX GET" or acquire.lua (which
		// names the side lease; the fill does too, but only the holder fills).
		name, mark := cmd.Name(), "}l:"
		if name == "set" {
			mark = "NX"
		}
		if name == "set" || name == "evalsha" || name == "eval" {
			for _, a := range cmd.Args() {
				if s, ok := a.(string); ok && strings.Contains(s, mark) {
					h.n.Add(1)
					break
				}
			}
		}
		return next(ctx, cmd)
	}
}
func (h *leaseChecks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAbsentAndErrorRecordsEndWithTheirWindow: once NegativeTTL (ErrorTTL) has passed, the
// next caller asks the source again: one load per window, not one forever.
func TestAbsentAndErrorRecordsEndWithTheirWindow(t *testing.T) {
	celebritytest.Long(t)
	s := celebritytest.Standalone(t)
	// The windows outlast the fleet's first asks many times over, even on a busy machine
	// (a window that ended during them would let a second load through).
	reps := fleetOf(t, fleet{client: func(t testing.TB) redis.UniversalClient { return s.Client(t) }}, 5,
		replicas.Options{NegativeTTL: 2 * time.Second, ErrorTTL: 2 * time.Second})
	p := celebritytest.NewPrefix(t)
	var loads atomic.Int64
	for _, tc := range []struct {
		key  string
		load replicas.Loader
		want error
	}{
		{p + "absent", func(context.Context, string) (replicas.Item, error) {
			loads.Add(1)
			return replicas.Item{}, replicas.ErrNotFound
		}, replicas.ErrNotFound},
		{p + "failing", func(context.Context, string) (replicas.Item, error) {
			loads.Add(1)
			return replicas.Item{}, errors.New("timeout")
		}, replicas.ErrLoadFailed},
	} {
		loads.Store(0)
		for _, err := range everyoneAsks(t, reps, tc.key, 3, tc.load) {
			require.ErrorIs(t, err, tc.want)
		}
		require.Equal(t, int64(1), loads.Load(), tc.key)
		require.Eventually(t, func() bool {
			_, err := reps[0].GetOrLoad(testkit.Ctx(t), tc.key, time.Minute, tc.load)
			require.ErrorIs(t, err, tc.want)
			return loads.Load() == 2
		}, 30*time.Second, 20*time.Millisecond, "the window ends and the source is asked again")
	}
}
