package replicas_test

import (
	"context"
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

func TestPopularMissLoadsOnceAcrossTheFleet(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "post:viral"
		prefix := celebritytest.NewPrefix(t)
		const instances, perInstance = 10, 10
		var loads atomic.Int64
		load := func(context.Context, string) (replicas.Item, error) {
			loads.Add(1)
			time.Sleep(50 * time.Millisecond) // a source query takes a while
			return replicas.Item{Value: []byte("body"), Version: 1}, nil
		}
		reps := make([]*replicas.Replicator, instances)
		for i := range reps {
			// A lease far longer than the load: on a loaded machine a 50ms load must not be
			// taken over, or the source runs twice by design.
			reps[i] = newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Hot: []string{key}, LeaseTTL: 20 * time.Second})
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		results := make(chan replicas.Item, instances*perInstance)
		errs := make(chan error, instances*perInstance)
		for i := range instances * perInstance {
			wg.Go(func() {
				<-start
				it, err := reps[i%instances].GetOrLoad(testkit.Ctx(t), key, time.Minute, load)
				if err != nil {
					errs <- err
					return
				}
				results <- it
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		close(results)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, results, instances*perInstance)
		for it := range results {
			require.Equal(t, replicas.Item{Value: []byte("body"), Version: 1}, it)
		}
		require.Equal(t, int64(1), loads.Load(), "the source is loaded once for the fleet")
		var wins, waits uint64
		for _, r := range reps {
			s := r.Stats()
			wins += s.LeaseWins
			waits += s.LeaseWaits
		}
		require.Equal(t, uint64(1), wins)
		// Later reads are served by the copies the fill wrote.
		it, err := reps[3].Get(testkit.Ctx(t), key)
		require.NoError(t, err)
		require.Equal(t, "body", string(it.Value))
	})
}

// stuckLoader returns a loader whose first call signals started and then blocks, ignoring
// its context as a hung or dead process would, until release is closed; it then returns
// first. Later calls return later at once. calls counts every call.
func stuckLoader(started chan<- struct{}, release <-chan struct{}, first, later replicas.Item, calls *atomic.Int64) replicas.Loader {
	return func(context.Context, string) (replicas.Item, error) {
		if calls.Add(1) == 1 {
			close(started)
			<-release
			return first, nil
		}
		return later, nil
	}
}

func TestCancelledLeaseHolderIsTakenOver(t *testing.T) {
	celebritytest.Long(t)
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "k"
		prefix := celebritytest.NewPrefix(t)
		// Long enough that the other instance finds the lease held on a loaded machine.
		o := replicas.Options{Prefix: prefix, LeaseTTL: 1500 * time.Millisecond, Hot: []string{key}}
		// The holder's hung loader keeps the fetch alive: cut off from Redis, it stops renewing.
		holder := newReplicator(t, hooked(t, f, noRenewals{}), o)
		other := newReplicator(t, f.client(t), o)
		var calls atomic.Int64
		started, release := make(chan struct{}), make(chan struct{})
		load := stuckLoader(started, release,
			replicas.Item{Value: []byte("slow"), Version: 1}, replicas.Item{Value: []byte("fresh"), Version: 1}, &calls)

		hctx, cancel := context.WithCancel(context.Background())
		holderDone := make(chan error, 1)
		go func() {
			_, err := holder.GetOrLoad(hctx, key, time.Minute, load)
			holderDone <- err
		}()
		<-started
		cancel()
		select {
		case err := <-holderDone:
			require.ErrorIs(t, err, context.Canceled, "the cancelled holder leaves at once")
		case <-time.After(5 * time.Second):
			t.Fatal("the cancelled lease holder did not return")
		}

		ctx, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel2()
		it, err := other.GetOrLoad(ctx, key, time.Minute, load)
		require.NoError(t, err)
		require.Equal(t, "fresh", string(it.Value))
		require.Equal(t, uint64(1), other.Stats().LeaseTakeovers)
		require.Equal(t, uint64(1), holder.Stats().LeaseWins)

		close(release) // the stuck load finishes; its fill must be refused
		require.Eventually(t, func() bool { return holder.Stats().FillsRefused == 1 }, 30*time.Second, 10*time.Millisecond)
		require.Equal(t, int64(2), calls.Load(), "the source ran at most twice")
		it, err = other.Get(testkit.Ctx(t), key)
		require.NoError(t, err)
		require.Equal(t, "fresh", string(it.Value))
	})
}

func TestSlowFillerCannotOverwriteNewerValue(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "k"
		prefix := celebritytest.NewPrefix(t)
		o := replicas.Options{Prefix: prefix, LeaseTTL: 200 * time.Millisecond, Copies: 3, Hot: []string{key}}
		slow := newReplicator(t, hooked(t, f, noRenewals{}), o) // cut off from Redis while it loads
		fast := newReplicator(t, f.client(t), o)
		var calls atomic.Int64
		started, release := make(chan struct{}), make(chan struct{})
		// The slow filler even carries a higher version: its token, not its version, is
		// what refuses it.
		load := stuckLoader(started, release,
			replicas.Item{Value: []byte("slow"), Version: 9}, replicas.Item{Value: []byte("fast"), Version: 2}, &calls)
		slowDone := make(chan replicas.Item, 1)
		go func() {
			it, err := slow.GetOrLoad(context.Background(), key, time.Minute, load)
			if err == nil {
				slowDone <- it
			}
			close(slowDone)
		}()
		<-started
		it, err := fast.GetOrLoad(testkit.Ctx(t), key, time.Minute, load)
		require.NoError(t, err)
		require.Equal(t, "fast", string(it.Value))
		close(release)
		got, ok := <-slowDone
		require.True(t, ok, "the slow caller gets a value")
		require.Equal(t, "fast", string(got.Value), "the slow caller is handed the newer stored value")
		require.Equal(t, uint64(1), slow.Stats().FillsRefused)

		c := f.client(t)
		ck, err := fast.CopyKeys(testkit.Ctx(t), key)
		require.NoError(t, err)
		for _, k := range append(ck, fast.PrimaryKey(key)) {
			v, _, data := stored(t, c, k)
			require.Equal(t, "fast", data, k)
			require.Equal(t, uint64(2), v, k)
		}
	})
}

func TestFailedLoadReleasesTheLease(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "k"
		// A long lease: the second caller can only get in because the first released it
		// (error records off: with them, the fleet answers the error for ErrorTTL).
		r := newReplicator(t, f.client(t), replicas.Options{LeaseTTL: time.Minute, ErrorTTL: -1})
		boom := func(context.Context, string) (replicas.Item, error) { return replicas.Item{}, context.DeadlineExceeded }
		_, err := r.GetOrLoad(testkit.Ctx(t), key, 0, boom)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		it, err := r.GetOrLoad(testkit.Ctx(t), key, 0, func(context.Context, string) (replicas.Item, error) {
			return replicas.Item{Value: []byte("ok"), Version: 1}, nil
		})
		require.NoError(t, err)
		require.Equal(t, "ok", string(it.Value))
		require.Equal(t, uint64(0), r.Stats().LeaseWaits)
	})
}

func TestLeaseSurvivesLostReplies(t *testing.T) {
	inj := faults.New()
	c := celebritytest.SharedCluster(t).Client(t, func(o *redis.ClusterOptions) { o.Dialer = inj.Dialer(nil) })
	key := celebritytest.NewPrefix(t) + "k"
	r := newReplicator(t, c, replicas.Options{})
	// Warm the scripts and connections on the master of key's slot ("{key}w" shares it), so
	// that the dropped replies below belong to scripts that really ran, not to NOSCRIPT
	// errors.
	_, err := r.GetOrLoad(testkit.Ctx(t), "{"+key+"}w", 0, func(context.Context, string) (replicas.Item, error) {
		return replicas.Item{Value: []byte("w"), Version: 1}, nil
	})
	require.NoError(t, err)
	// The lease acquisition loses its reply once (the fill also names the lease, but this
	// rule is used up first), then the fill loses its reply once. The retries must find the
	// lease still theirs and the fill already done.
	inj.DropReply(faults.Match{Command: "SET", Arg: "l2,"}, 1)
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "fill-data"}, 1)
	var loads atomic.Int64
	it, err := r.GetOrLoad(testkit.Ctx(t), key, 0, func(context.Context, string) (replicas.Item, error) {
		loads.Add(1)
		return replicas.Item{Value: []byte("fill-data"), Version: 4}, nil
	})
	require.NoError(t, err)
	require.Equal(t, "fill-data", string(it.Value))
	require.Equal(t, int64(2), inj.Dropped())
	require.Equal(t, int64(1), loads.Load())
	require.Zero(t, r.Stats().FillsRefused)
	require.Equal(t, uint64(2), r.Stats().LeaseWins, "one lease for the warm-up key, one for key")
	v, _, _ := stored(t, c, r.PrimaryKey(key))
	require.Equal(t, uint64(4), v)
	n, err := celebritytest.AdminOf(t, c).Exists(testkit.Ctx(t), r.LeaseKey(key)).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the fill replaced the lease, which lived in the primary's key")
}

func TestWaiterLeavesOnItsContext(t *testing.T) {
	s := celebritytest.Standalone(t)
	key := celebritytest.NewPrefix(t) + "k"
	prefix := celebritytest.NewPrefix(t)
	holder := newReplicator(t, s.Client(t), replicas.Options{Prefix: prefix})
	waiter := newReplicator(t, s.Client(t), replicas.Options{Prefix: prefix})
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	load := stuckLoader(started, release, replicas.Item{Value: []byte("x"), Version: 1}, replicas.Item{}, &calls)
	go func() { _, _ = holder.GetOrLoad(context.Background(), key, 0, load) }()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := waiter.GetOrLoad(ctx, key, 0, load)
		done <- err
	}()
	require.Eventually(t, func() bool { return waiter.Stats().LeaseWaits == 1 }, 30*time.Second, 5*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not leave on its context")
	}
	close(release)
	require.Equal(t, int64(1), calls.Load())
}

func TestInstancesWithTheSameRandDoNotShareALease(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "k"
		// A host seeding every instance's Rand alike (for reproducible copy choice) must not
		// hand two instances the same lease token.
		o := replicas.Options{Prefix: celebritytest.NewPrefix(t), Rand: func() uint64 { return 7 }}
		a := newReplicator(t, f.client(t), o)
		b := newReplicator(t, f.client(t), o)
		var calls atomic.Int64
		started, release := make(chan struct{}), make(chan struct{})
		load := stuckLoader(started, release,
			replicas.Item{Value: []byte("a"), Version: 1}, replicas.Item{Value: []byte("b"), Version: 1}, &calls)
		aDone := make(chan error, 1)
		go func() {
			_, err := a.GetOrLoad(testkit.Ctx(t), key, 0, load)
			aDone <- err
		}()
		<-started
		bDone := make(chan replicas.Item, 1)
		go func() {
			it, err := b.GetOrLoad(testkit.Ctx(t), key, 0, load)
			if err == nil {
				bDone <- it
			}
			close(bDone)
		}()
		require.Eventually(t, func() bool { return b.Stats().LeaseWaits+b.Stats().LeaseWins > 0 },
			30*time.Second, 5*time.Millisecond)
		close(release)
		require.NoError(t, <-aDone)
		it, ok := <-bDone
		require.True(t, ok, "b gets a value")
		require.Equal(t, "a", string(it.Value), "b waits for a's fill")
		require.Equal(t, int64(1), calls.Load(), "the source ran once")
		require.Zero(t, b.Stats().LeaseWins)
	})
}

// TestFillFindingAWriteLeavesItExactly: a fill swaps its lease for the record in one write
// that keeps the key's TTL; when a Set replaced the lease while the source was read, that
// write finds the Set's record and must put it back as it was, value and TTL, before the
// fill is refused as stale.
func TestFillFindingAWriteLeavesItExactly(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		c := f.client(t)
		r := newReplicator(t, c, replicas.Options{})
		ctx := testkit.Ctx(t)
		key := celebritytest.NewPrefix(t) + "post:9"
		loading, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		var got replicas.Item
		go func() {
			var err error
			got, err = r.GetOrLoad(ctx, key, time.Hour, func(context.Context, string) (replicas.Item, error) {
				close(loading)
				<-release
				return replicas.Item{Value: []byte("v1"), Version: 1}, nil
			})
			done <- err
		}()
		<-loading
		require.NoError(t, r.Set(ctx, key, []byte("v2"), 2, 30*time.Second))
		close(release)
		require.NoError(t, <-done)
		require.Equal(t, replicas.Item{Value: []byte("v2"), Version: 2}, got)
		stored, err := r.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, got, stored)
		ttl, err := c.PTTL(ctx, r.PrimaryKey(key)).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0))
		require.LessOrEqual(t, ttl, 30*time.Second, "the Set's TTL, not the lease's hour")
	})
}
