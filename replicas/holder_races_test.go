package replicas_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// A holder paused in its load past its lease's deadline (its marker still lives: it was
// given the value's TTL) is taken over by three instances at once: exactly one of them loads
// and fills version 2. When the paused holder resumes with the version 1 it loaded, its fill
// is refused and its caller gets what the key holds; version 2 stays.
func TestZombieHolderAfterTakeover(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		o := replicas.Options{Prefix: prefix, LeaseTTL: 200 * time.Millisecond}
		zombie := newReplicator(t, hooked(t, f, noRenewals{}), o) // cut off from Redis while it loads
		ctx := testkit.Ctx(t)
		const key = "post:zombie-takeover"
		primary := zombie.PrimaryKey(key)
		started, release := make(chan struct{}), make(chan struct{})
		type result struct {
			it  replicas.Item
			err error
		}
		done := make(chan result, 1)
		go func() {
			it, err := zombie.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
				close(started)
				<-release
				return replicas.Item{Value: []byte("v1"), Version: 1}, nil
			})
			done <- result{it, err}
		}()
		<-started
		require.Eventually(t, func() bool { return leaseOver(ctx, f.client(t), primary) },
			20*time.Second, 5*time.Millisecond)

		var loads atomic.Int32
		var wg sync.WaitGroup
		got := make([]result, 3)
		// The instances taking over hold their lease far longer than they need to load, so
		// that one of them slowed down on a loaded machine is not taken over in turn.
		to := o
		to.LeaseTTL = 5 * time.Minute
		for i := range got {
			r := newReplicator(t, f.client(t), to)
			wg.Add(1)
			go func() {
				defer wg.Done()
				it, err := r.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
					loads.Add(1)
					return replicas.Item{Value: []byte("v2"), Version: 2}, nil
				})
				got[i] = result{it, err}
			}()
		}
		wg.Wait()
		require.EqualValues(t, 1, loads.Load(), "one load per lease across the instances taking over")
		for _, g := range got {
			require.NoError(t, g.err)
			require.Equal(t, replicas.Item{Value: []byte("v2"), Version: 2}, g.it)
		}

		close(release)
		z := <-done
		require.NoError(t, z.err)
		require.Equal(t, replicas.Item{Value: []byte("v2"), Version: 2}, z.it,
			"the zombie's caller gets what the key holds")
		for _, r := range []*replicas.Replicator{zombie, newReplicator(t, f.client(t), o)} {
			it, err := r.Get(ctx, key)
			require.NoError(t, err)
			require.Equal(t, uint64(2), it.Version, "the zombie's fill took the key back")
		}
		v, tomb, _ := stored(t, f.client(t), primary)
		require.Equal(t, uint64(2), v)
		require.False(t, tomb)
	})
}

// A Delete that returns while a holder loads (its lease in the primary, given the value's
// TTL) wins over that holder's fill of the version it loaded before the delete: after the
// holder's call returns, no instance serves that version, from the key or from a new load of
// a source that still has it.
func TestDeleteWhileHolderLoads(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		o := replicas.Options{Prefix: prefix, LeaseTTL: 10 * time.Second}
		holder := newReplicator(t, f.client(t), o)
		other := newReplicator(t, f.client(t), o)
		ctx := testkit.Ctx(t)
		const key = "post:deleted-while-loading"
		started, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := holder.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
				close(started)
				<-release
				return replicas.Item{Value: []byte("v1"), Version: 1}, nil
			})
			done <- err
		}()
		<-started
		require.NoError(t, other.Delete(ctx, key, 2))
		close(release)
		err := <-done
		if err != nil {
			require.ErrorIs(t, err, replicas.ErrNotFound, "the call overlapped the Delete: v1 or not found")
		}
		stale := func(context.Context, string) (replicas.Item, error) {
			return replicas.Item{Value: []byte("v1"), Version: 1}, nil
		}
		for _, r := range []*replicas.Replicator{holder, other, newReplicator(t, f.client(t), o)} {
			it, err := r.Get(ctx, key)
			require.ErrorIs(t, err, replicas.ErrNotFound, "Get served v%d after its delete", it.Version)
			it, err = r.GetOrLoad(ctx, key, time.Minute, stale)
			require.ErrorIs(t, err, replicas.ErrNotFound, "GetOrLoad served v%d after its delete", it.Version)
		}
	})
}

// faultFleets runs fn on the shared standalone server and the shared cluster, through a
// client whose connections pass a fault injector (go-redis retries left at their default).
func faultFleets(t *testing.T, fn func(t *testing.T, c redis.UniversalClient, inj *faults.Injector, f fleet)) {
	t.Run("standalone", func(t *testing.T) {
		inj := faults.New()
		s := celebritytest.Standalone(t)
		c := s.Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil) })
		fn(t, c, inj, fleet{name: "standalone", client: func(t testing.TB) redis.UniversalClient { return s.Client(t) }})
	})
	t.Run("cluster", func(t *testing.T) {
		inj := faults.New()
		cl := celebritytest.SharedCluster(t)
		c := cl.Client(t, func(o *redis.ClusterOptions) { o.Dialer = inj.Dialer(nil) })
		fn(t, c, inj, clusterFleet(cl))
	})
}

// The reply of the command that took the lease is lost and go-redis sends it again: the
// second attempt finds the caller's own marker. The caller must know the lease as its own
// and load at once (once), not wait for its own lease to run out (LeaseTTL is longer than
// the test's context), and the fleet then reads the fill without loading again.
func TestLostLeaseReplyRetried(t *testing.T) {
	faultFleets(t, func(t *testing.T, c redis.UniversalClient, inj *faults.Injector, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		o := replicas.Options{Prefix: prefix, LeaseTTL: 5 * time.Minute, LoadTimeout: 5 * time.Minute}
		r := newReplicator(t, c, o)
		ctx := testkit.Ctx(t)
		const key = "post:lost-lease-reply"
		var loads atomic.Int32
		load := func(context.Context, string) (replicas.Item, error) {
			loads.Add(1)
			return replicas.Item{Value: []byte("v1"), Version: 1}, nil
		}
		inj.DropReply(faults.Match{Command: "SET", Arg: "l2,"}, 1)
		it, err := r.GetOrLoad(ctx, key, time.Minute, load)
		require.NoError(t, err)
		require.Equal(t, replicas.Item{Value: []byte("v1"), Version: 1}, it)
		require.EqualValues(t, 1, inj.Dropped(), "the lease command's reply was dropped")
		other := newReplicator(t, f.client(t), o)
		it, err = other.GetOrLoad(ctx, key, time.Minute, load)
		require.NoError(t, err)
		require.Equal(t, uint64(1), it.Version)
		require.EqualValues(t, 1, loads.Load(), "one load for the fleet")
	})
}

// The reply of the fill is lost and go-redis sends it again: the retry finds the record
// its first attempt swapped in for the lease, which is the same content; the caller gets
// its value, and the key holds it with its TTL.
func TestLostFillReplyRetried(t *testing.T) {
	faultFleets(t, func(t *testing.T, c redis.UniversalClient, inj *faults.Injector, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		o := replicas.Options{Prefix: prefix}
		r := newReplicator(t, c, o)
		ctx := testkit.Ctx(t)
		const key = "post:lost-fill-reply"
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "v1-body"}, 1)
		it, err := r.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
			return replicas.Item{Value: []byte("v1-body"), Version: 1}, nil
		})
		require.NoError(t, err)
		require.Equal(t, replicas.Item{Value: []byte("v1-body"), Version: 1}, it)
		require.EqualValues(t, 1, inj.Dropped(), "the fill's reply was dropped")
		plain := f.client(t)
		ttl, err := plain.PTTL(ctx, r.PrimaryKey(key)).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0), "the filled key keeps a TTL")
		got, err := newReplicator(t, plain, o).Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, it, got)
	})
}

// TestLostWakeReplyIsNotWaitedForAgain: an instance waits for another's fill, and the reply
// of its BLPOP, which popped the filler's wake-up, is lost. The BLPOP must not be sent again:
// the element is gone, and the resend would block its whole timeout (up to a second, until
// the lease's deadline) after the fill had landed, with every caller of the key on the
// instance. The waiter looks at the lease again instead and reads the fill, loading nothing.
// A second drop armed for BLPOP counts a resend: its reply would be dropped too.
func TestLostWakeReplyIsNotWaitedForAgain(t *testing.T) {
	faultFleets(t, func(t *testing.T, c redis.UniversalClient, inj *faults.Injector, f fleet) {
		o := replicas.Options{Prefix: celebritytest.NewPrefix(t)}
		holder, waiter := newReplicator(t, f.client(t), o), newReplicator(t, c, o)
		w := holdAndWait(t, holder, waiter, "post:lost-wake", func() { inj.DropReply(faults.Match{Command: "BLPOP"}, 2) })
		filled := time.Now()
		w.fill(t)
		t.Logf("the waiter answered %v after the fill was released", time.Since(filled))
		require.EqualValues(t, 1, inj.Dropped(), "the BLPOP whose reply was lost was not sent again")
	})
}

// heldWait is a waiter's GetOrLoad of a key whose holder (another Replicator) is loading it
// with a loader that returns only when fill is called.
type heldWait struct {
	release   chan struct{}
	held, got chan error
	calls     atomic.Int64
}

// holdAndWait starts holder's GetOrLoad of key, then, once its loader runs and after
// beforeWait, waiter's, which must wait for the fill (it fails if it loads), and returns
// when the waiter waits.
func holdAndWait(t *testing.T, holder, waiter *replicas.Replicator, key string, beforeWait func()) *heldWait {
	want := replicas.Item{Value: []byte("v1"), Version: 1}
	w := &heldWait{release: make(chan struct{}), held: make(chan error, 1), got: make(chan error, 1)}
	started := make(chan struct{})
	go func() {
		_, err := holder.GetOrLoad(testkit.Ctx(t), key, time.Minute, stuckLoader(started, w.release, want, want, &w.calls))
		w.held <- err
	}()
	<-started
	beforeWait()
	waits := waiter.Stats().LeaseWaits
	go func() {
		it, err := waiter.GetOrLoad(testkit.Ctx(t), key, time.Minute, func(context.Context, string) (replicas.Item, error) {
			return replicas.Item{}, errors.New("the waiter loaded")
		})
		if err == nil && !reflect.DeepEqual(it, want) {
			err = fmt.Errorf("got %v", it)
		}
		w.got <- err
	}()
	require.Eventually(t, func() bool { return waiter.Stats().LeaseWaits == waits+1 }, 20*time.Second, time.Millisecond)
	return w
}

// fill lets the holder's loader return and requires both calls to succeed, with one load.
func (w *heldWait) fill(t *testing.T) {
	close(w.release)
	require.NoError(t, <-w.held)
	require.NoError(t, <-w.got)
	require.EqualValues(t, 1, w.calls.Load(), "one load")
}

// A paused holder resumes after another instance took its lease over but before that one
// filled: its fill finds the new holder's marker, must leave it exactly as it was (the new
// holder's fill still swaps it), and its caller waits for that fill instead of putting its
// own, older load in.
func TestZombieResumesBeforeTheNewHolderFills(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		zombie := newReplicator(t, hooked(t, f, noRenewals{}), replicas.Options{Prefix: prefix, LeaseTTL: 200 * time.Millisecond})
		taker := newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, LeaseTTL: 5 * time.Minute})
		ctx := testkit.Ctx(t)
		const key = "post:zombie-before-fill"
		primary := zombie.PrimaryKey(key)
		plain := f.client(t)
		type result struct {
			it  replicas.Item
			err error
		}
		startedZ, releaseZ := make(chan struct{}), make(chan struct{})
		doneZ := make(chan result, 1)
		go func() {
			it, err := zombie.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
				close(startedZ)
				<-releaseZ
				return replicas.Item{Value: []byte("v1"), Version: 1}, nil
			})
			doneZ <- result{it, err}
		}()
		<-startedZ
		require.Eventually(t, func() bool { return leaseOver(ctx, plain, primary) },
			20*time.Second, 5*time.Millisecond)
		startedT, releaseT := make(chan struct{}), make(chan struct{})
		doneT := make(chan result, 1)
		go func() {
			it, err := taker.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
				close(startedT)
				<-releaseT
				return replicas.Item{Value: []byte("v2"), Version: 2}, nil
			})
			doneT <- result{it, err}
		}()
		<-startedT
		marker, err := plain.Get(ctx, primary).Result()
		require.NoError(t, err)
		require.Regexp(t, `^l2,[^,]+,0$`, marker, "the taker holds the lease")
		close(releaseZ)
		// The zombie's fill is refused and it waits on the taker's lease: one waiter.
		require.Eventually(t, func() bool {
			raw, err := plain.Get(ctx, primary).Result()
			return err == nil && raw == marker[:len(marker)-1]+"1"
		}, 20*time.Second, 5*time.Millisecond, "the zombie waits on the taker's lease")
		close(releaseT)
		want := replicas.Item{Value: []byte("v2"), Version: 2}
		for _, done := range []chan result{doneT, doneZ} {
			r := <-done
			require.NoError(t, r.err)
			require.Equal(t, want, r.it)
		}
		v, tomb, _ := stored(t, plain, primary)
		require.Equal(t, uint64(2), v)
		require.False(t, tomb)
		ttl, err := plain.PTTL(ctx, primary).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0))
		require.LessOrEqual(t, ttl, time.Minute)
	})
}

// A paused holder whose load ends in "absent" or an error resumes after another instance
// took its lease over (before that one filled, or after): the absent or error record it
// leaves must not replace the new holder's lease or its value, and the fleet keeps
// answering with version 2 without loading again.
func TestZombieAbsentOrErrorAfterTakeover(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		outcomes := map[string]error{"absent": replicas.ErrNotFound, "error": errors.New("source down")}
		for name, outcome := range outcomes {
			for _, filledFirst := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/filledFirst=%v", name, filledFirst), func(t *testing.T) {
					prefix := celebritytest.NewPrefix(t)
					marks := replicas.Options{Prefix: prefix, NegativeTTL: time.Minute, ErrorTTL: time.Minute}
					zo := marks
					zo.LeaseTTL = 200 * time.Millisecond
					to := marks
					to.LeaseTTL = 5 * time.Minute
					zombie := newReplicator(t, hooked(t, f, noRenewals{}), zo)
					taker := newReplicator(t, f.client(t), to)
					ctx := testkit.Ctx(t)
					const key = "post:zombie-marks"
					primary := zombie.PrimaryKey(key)
					plain := f.client(t)
					startedZ, releaseZ := make(chan struct{}), make(chan struct{})
					doneZ := make(chan error, 1)
					go func() {
						_, err := zombie.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
							close(startedZ)
							<-releaseZ
							return replicas.Item{}, outcome
						})
						doneZ <- err
					}()
					<-startedZ
					require.Eventually(t, func() bool { return leaseOver(ctx, plain, primary) },
						20*time.Second, 5*time.Millisecond)
					startedT, releaseT := make(chan struct{}), make(chan struct{})
					type result struct {
						it  replicas.Item
						err error
					}
					doneT := make(chan result, 1)
					go func() {
						it, err := taker.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
							close(startedT)
							<-releaseT
							return replicas.Item{Value: []byte("v2"), Version: 2}, nil
						})
						doneT <- result{it, err}
					}()
					<-startedT
					want := replicas.Item{Value: []byte("v2"), Version: 2}
					if filledFirst {
						close(releaseT)
						r := <-doneT
						require.NoError(t, r.err)
						require.Equal(t, want, r.it)
						close(releaseZ)
						<-doneZ
					} else {
						close(releaseZ)
						<-doneZ
						close(releaseT)
						r := <-doneT
						require.NoError(t, r.err, "the zombie's mark took the new holder's lease")
						require.Equal(t, want, r.it)
					}
					v, tomb, _ := stored(t, plain, primary)
					require.Equal(t, uint64(2), v)
					require.False(t, tomb)
					fresh := newReplicator(t, f.client(t), marks)
					it, err := fresh.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
						return replicas.Item{}, errors.New("loaded again")
					})
					require.NoError(t, err)
					require.Equal(t, want, it)
				})
			}
		}
	})
}

// A Set returns while a holder loads an older version under its lease (given the value's
// TTL, a minute): the holder's fill finds the Set's record, puts it back exactly (the Set's
// shorter TTL, not the lease's) and is refused; after the Set returned, no instance reads an
// older version.
func TestSetWhileHolderLoadsOlder(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		o := replicas.Options{Prefix: prefix, LeaseTTL: 10 * time.Second}
		holder := newReplicator(t, f.client(t), o)
		writer := newReplicator(t, f.client(t), o)
		ctx := testkit.Ctx(t)
		const key = "post:set-while-loading"
		plain := f.client(t)
		started, release := make(chan struct{}), make(chan struct{})
		type result struct {
			it  replicas.Item
			err error
		}
		done := make(chan result, 1)
		go func() {
			it, err := holder.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
				close(started)
				<-release
				return replicas.Item{Value: []byte("v1"), Version: 1}, nil
			})
			done <- result{it, err}
		}()
		<-started
		const setTTL = 20 * time.Second
		require.NoError(t, writer.Set(ctx, key, []byte("v2"), 2, setTTL))
		close(release)
		r := <-done
		require.NoError(t, r.err)
		require.Equal(t, uint64(2), r.it.Version, "the holder's caller gets what the key holds")
		ttl, err := plain.PTTL(ctx, holder.PrimaryKey(key)).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0))
		require.LessOrEqual(t, ttl, setTTL, "the Set's TTL, not the lease's")
		for _, r := range []*replicas.Replicator{holder, writer, newReplicator(t, f.client(t), o)} {
			it, err := r.Get(ctx, key)
			require.NoError(t, err)
			require.Equal(t, replicas.Item{Value: []byte("v2"), Version: 2}, it)
		}
	})
}

// blpopErrors counts the BLPOPs that returned (calls) and those that failed (n: a reply
// other than one element or nil).
type blpopErrors struct{ calls, n atomic.Int64 }

func (h *blpopErrors) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *blpopErrors) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *blpopErrors) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() != "blpop" {
			return err
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			h.n.Add(1)
		}
		h.calls.Add(1)
		return err
	}
}

// A waiter over a client whose ReadTimeout is shorter than a BLPOP's second blocks for less
// than the read timeout: its wait for a slow holder ends in the fill, with no read that
// timed out (each would close a connection of the pool).
func TestWaitBlocksWithinTheClientsReadTimeout(t *testing.T) {
	srv := celebritytest.Standalone(t)
	o := replicas.Options{Prefix: celebritytest.NewPrefix(t)}
	errs := &blpopErrors{}
	// 600ms: under the second a BLPOP would block, with room for a loaded race-enabled run
	// to read each capped block's (300ms) reply in time.
	short := srv.Client(t, func(o *redis.Options) { o.ReadTimeout = 600 * time.Millisecond })
	short.AddHook(errs)
	holder, waiter := newReplicator(t, srv.Client(t), o), newReplicator(t, short, o)
	w := holdAndWait(t, holder, waiter, "post:slow-source", func() {})
	// The source is slow: the waiter's blocks end (each within the read timeout) while it
	// waits, three of them before the fill.
	require.Eventually(t, func() bool { return errs.calls.Load() >= 3 }, 20*time.Second, time.Millisecond)
	w.fill(t)
	require.Zero(t, errs.n.Load(), "BLPOPs that failed (timed out)")
}
