package replicas_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// After Delete of version 2 returned, a GetOrLoad whose source still has version 1 (a
// lagging database replica) must not serve version 1: the tombstone says that value is
// deleted. Hot and not hot.
func TestGetOrLoadAfterDeleteDoesNotServeOlderLoad(t *testing.T) {
	for _, hot := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "hot"}[hot], func(t *testing.T) {
			c := celebritytest.Standalone(t).Client(t)
			ctx := testkit.Ctx(t)
			r := newReplicator(t, c, replicas.Options{Copies: 3})
			const key = "post:deleted"
			if hot {
				require.NoError(t, r.Promote(ctx, key))
			}
			require.NoError(t, r.Set(ctx, key, []byte("v1"), 1, time.Minute))
			require.NoError(t, r.Delete(ctx, key, 2))
			var loads atomic.Int32
			load := func(context.Context, string) (replicas.Item, error) {
				loads.Add(1)
				return replicas.Item{Value: []byte("v1"), Version: 1}, nil
			}
			for range 3 {
				it, err := r.GetOrLoad(ctx, key, time.Minute, load)
				require.ErrorIs(t, err, replicas.ErrNotFound, "served %q v%d after its delete", it.Value, it.Version)
			}
			_, err := r.Get(ctx, key)
			require.ErrorIs(t, err, replicas.ErrNotFound)
		})
	}
}

// A filler whose lease expired while it loaded, with nobody taking the lease over, is
// refused (its token no longer holds the lease); its callers must still get what it loaded,
// filled under a lease taken again, never an empty value of version 0.
func TestZombieFillerWithLeaseGoneReturnsItsLoad(t *testing.T) {
	for _, hot := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "hot"}[hot], func(t *testing.T) {
			c := celebritytest.Standalone(t).Client(t)
			ctx := testkit.Ctx(t)
			zc := celebritytest.Standalone(t).Client(t)
			zc.AddHook(noRenewals{}) // the filler is cut off from Redis while it loads
			r := newReplicator(t, zc, replicas.Options{Copies: 2, LeaseTTL: 100 * time.Millisecond})
			const key = "post:zombie"
			if hot {
				require.NoError(t, r.Promote(ctx, key))
			}
			primary := r.PrimaryKey(key)
			started := make(chan struct{})
			release := make(chan struct{})
			go func() {
				<-started
				// The lease (in the primary's key) ends while the loader runs.
				require.Eventually(t, func() bool { return leaseOver(ctx, c, primary) },
					20*time.Second, 5*time.Millisecond)
				close(release)
			}()
			it, err := r.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
				close(started)
				<-release
				return replicas.Item{Value: []byte("v1"), Version: 1}, nil
			})
			require.NoError(t, err)
			require.Equal(t, replicas.Item{Value: []byte("v1"), Version: 1}, it)
			got, err := r.Get(ctx, key)
			require.NoError(t, err)
			require.Equal(t, it, got, "what the caller got is what the key holds")
		})
	}
}

// leaseOver reports whether key holds no live lease: nothing, or a lease marker
// "l2,<random>.<deadline>,<waiters>" whose deadline (Unix ms) has passed.
func leaseOver(ctx context.Context, c redis.Cmdable, key string) bool {
	raw, err := c.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return true
	}
	var tok string
	var waiters int
	if _, err := fmt.Sscanf(strings.ReplaceAll(raw, ",", " "), "l2 %s %d", &tok, &waiters); err != nil {
		return false
	}
	_, deadline, ok := strings.Cut(tok, ".")
	ms, err := strconv.ParseInt(deadline, 10, 64)
	return ok && err == nil && time.Now().UnixMilli() > ms
}

// holdReply is a go-redis hook that lets the first matching command run on the server and
// then holds its reply back until release is closed: an actor paused between its read and
// the use of what it read.
type holdReply struct {
	match   func(redis.Cmder) bool
	armed   atomic.Bool
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func newHoldReply(match func(redis.Cmder) bool) *holdReply {
	return &holdReply{match: match, held: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.armed.Load() && h.match(cmd) {
			first := false
			h.once.Do(func() { first = true; close(h.held) })
			if first {
				<-h.release
			}
		}
		return err
	}
}
func (h *holdReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A GetOrLoad that starts after a Delete returned must not be answered by a fetch of the
// same instance whose read ran before the Delete (and whose reply was held back): it may
// not join a fetch whose deciding read is already under way.
func TestGetOrLoadAfterDeleteDoesNotJoinAnEarlierRead(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		ctx := testkit.Ctx(t)
		hold := newHoldReply(func(cmd redis.Cmder) bool {
			a := cmd.Args()
			return cmd.Name() == "set" && slices.ContainsFunc(a, func(x any) bool { return strings.EqualFold(fmt.Sprint(x), "get") })
		})
		prefix := celebritytest.NewPrefix(t)
		r := newReplicator(t, hooked(t, f, hold), replicas.Options{Prefix: prefix})
		w := newReplicator(t, f.client(t), replicas.Options{Prefix: prefix})
		const key = "post:joined"
		require.NoError(t, w.Set(ctx, key, []byte("v1"), 1, time.Minute))
		hold.armed.Store(true)
		first := make(chan error, 1)
		go func() {
			_, err := r.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
				return replicas.Item{}, replicas.ErrNotFound
			})
			first <- err
		}()
		<-hold.held // the first fetch read v1; its reply is held back
		require.NoError(t, w.Delete(ctx, key, 2))
		loaded := make(chan struct{})
		var once sync.Once
		type result struct {
			it  replicas.Item
			err error
		}
		second := make(chan result, 1)
		go func() {
			it, err := r.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
				once.Do(func() { close(loaded) })
				return replicas.Item{}, replicas.ErrNotFound
			})
			second <- result{it, err}
		}()
		// The second call loads by itself (fixed) or is stuck behind the held fetch (broken).
		select {
		case <-loaded:
		case <-time.After(3 * time.Second):
		}
		close(hold.release)
		res := <-second
		require.ErrorIs(t, res.err, replicas.ErrNotFound, "served %q v%d after its delete", res.it.Value, res.it.Version)
		require.NoError(t, <-first) // the first call overlapped the Delete: v1 is a fair answer
	})
}

// After a Delete, a source that still has the older version (a lagging database replica)
// is loaded once per NegativeTTL for the whole fleet, as a source without the key is: the
// refused fill leaves an absent record in the lease.
func TestFleetLoadsALaggingSourceOnceAfterDelete(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		ctx := testkit.Ctx(t)
		prefix := celebritytest.NewPrefix(t)
		o := replicas.Options{Prefix: prefix, NegativeTTL: time.Minute}
		const key = "post:lagging"
		w := newReplicator(t, f.client(t), o)
		require.NoError(t, w.Set(ctx, key, []byte("v1"), 1, time.Minute))
		require.NoError(t, w.Delete(ctx, key, 2))
		var loads atomic.Int32
		load := func(context.Context, string) (replicas.Item, error) {
			loads.Add(1)
			return replicas.Item{Value: []byte("v1"), Version: 1}, nil
		}
		for i := range 5 {
			r := newReplicator(t, f.client(t), o)
			_, err := r.GetOrLoad(ctx, key, time.Minute, load)
			require.ErrorIs(t, err, replicas.ErrNotFound, "instance %d", i)
		}
		require.Equal(t, int32(1), loads.Load(), "source loads across the fleet")
		// A newer version written meanwhile is read at once.
		require.NoError(t, w.Set(ctx, key, []byte("v3"), 3, time.Minute))
		it, err := newReplicator(t, f.client(t), o).GetOrLoad(ctx, key, time.Minute, load)
		require.NoError(t, err)
		require.Equal(t, uint64(3), it.Version)
	})
}

// A hot reader falls back to the primary, registers its copy and reads v1, then is held
// back before its refill lands; meanwhile an instance to which the key is not hot deletes
// it (version 2). When the refill lands, no reader may see v1: the Delete reached the
// registered copy first and the refill is refused.
func TestHeldBackRefillAfterDeleteNeverServesTheValue(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		key := prefix + "post:refill"
		hot := replicas.Options{Prefix: prefix, Copies: 3, Hot: []string{key}}
		hold := newHoldBack()
		slow := newReplicator(t, hooked(t, f, hold), hot)
		reader := newReplicator(t, f.client(t), hot)
		w := newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Copies: 3})
		ctx := testkit.Ctx(t)
		require.NoError(t, w.Set(ctx, key, []byte("v1"), 1, time.Minute)) // not replicated yet

		hold.armed.Store(true)
		got := make(chan error, 1)
		go func() {
			it, err := slow.Get(ctx, key)
			if err == nil && it.Version != 1 {
				err = fmt.Errorf("read v%d", it.Version)
			}
			got <- err
		}()
		<-hold.held // registered and read v1; the refill is in flight
		require.NoError(t, w.Delete(ctx, key, 2))
		close(hold.release)
		require.NoError(t, <-got, "the held reader overlapped the Delete: v1 is a fair answer")
		require.Equal(t, map[string]int{"miss": 30}, hotReads(t, reader, key, 30))
		require.Equal(t, map[string]int{"miss": 30}, hotReads(t, slow, key, 30))
		require.NoError(t, w.Set(ctx, key, []byte("v3"), 3, time.Minute))
		require.Equal(t, map[string]int{"v3": 30}, hotReads(t, slow, key, 30))
	})
}

// A server restored to an earlier point between a hot Set's primary write and its copy
// writes forgets the registration those copies were written under: the late copies land
// unseen by the registry. A writer to which the key is hot registers its layout again, so
// its next Set (or Delete) reaches them, and no reader is taken back afterwards.
func TestRestoredServerForgetsRegistrationsAHotWriterRestores(t *testing.T) {
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	prefix := celebritytest.NewPrefix(t)
	key := prefix + "post:restored"
	hot := replicas.Options{Prefix: prefix, Copies: 3, Hot: []string{key}}
	hold := newHoldBack()
	held := s.Client(t)
	held.AddHook(hold)
	slow := newReplicator(t, held, hot)
	reader := newReplicator(t, s.Client(t), hot)
	w := newReplicator(t, s.Client(t), hot)
	ctx := testkit.Ctx(t)
	require.NoError(t, newReplicator(t, s.Client(t), replicas.Options{Prefix: prefix}).
		Set(ctx, key, []byte("v1"), 1, time.Minute)) // not replicated yet
	snap := s.Snapshot(t)

	hold.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- slow.Set(ctx, key, []byte("v2"), 2, time.Minute) }()
	<-hold.held // v2 and its registration are at the primary; the copy writes are in flight
	s.RestoreSnapshot(t, snap)
	close(hold.release)
	require.NoError(t, <-done) // the copies landed on the restored server
	c := s.Client(t)
	v, _, _ := stored(t, c, reader.PrimaryKey(key))
	require.Equal(t, uint64(1), v, "the primary is back at v1, without registrations")
	ck, err := reader.CopyKeys(ctx, key)
	require.NoError(t, err)
	for _, k := range ck {
		v, _, _ := stored(t, c, k)
		require.Equal(t, uint64(2), v, k)
	}

	require.NoError(t, w.Set(ctx, key, []byte("v3"), 3, time.Minute))
	require.Equal(t, map[string]int{"v3": 30}, hotReads(t, reader, key, 30))
	require.NoError(t, w.Delete(ctx, key, 4))
	require.Equal(t, map[string]int{"miss": 30}, hotReads(t, reader, key, 30))
}

// Two fillers believe they hold the lease: A's lease (beside a tombstone) expired while it
// loaded and B took it over. A loads the newer version, B (slower to reach its source, or
// reading a lagging one) an older one. Once A's caller got a version, no later read may
// return an older one: A's fill, refused by the lease, must still be kept as a version
// floor when it is newer than what is stored.
func TestTwoFillersNeverTakeAReaderBack(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	ctx := testkit.Ctx(t)
	prefix := celebritytest.NewPrefix(t)
	o := replicas.Options{Prefix: prefix, LeaseTTL: 100 * time.Millisecond}
	// Both are cut off from Redis while they load: their leases end.
	ac := celebritytest.Standalone(t).Client(t)
	ac.AddHook(noRenewals{})
	a := newReplicator(t, ac, o)
	b := newReplicator(t, ac, o)
	const key = "post:two-fillers"
	require.NoError(t, a.Delete(ctx, key, 1)) // the lease lives beside the tombstone
	side := a.LeaseKey(key)

	aStarted, aGo := make(chan struct{}), make(chan struct{})
	aDone := make(chan replicas.Item, 1)
	go func() {
		it, err := a.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
			close(aStarted)
			<-aGo
			return replicas.Item{Value: []byte("v5"), Version: 5}, nil
		})
		if err != nil {
			t.Error(err)
		}
		aDone <- it
	}()
	<-aStarted
	admin := celebritytest.AdminOf(t, c) // EXISTS is not in the package's rule
	require.Eventually(t, func() bool { return admin.Exists(ctx, side).Val() == 0 }, 20*time.Second, 5*time.Millisecond,
		"A's lease expires while it loads")
	bStarted, bGo := make(chan struct{}), make(chan struct{})
	bDone := make(chan replicas.Item, 1)
	go func() {
		it, err := b.GetOrLoad(ctx, key, time.Minute, func(context.Context, string) (replicas.Item, error) {
			close(bStarted)
			<-bGo
			return replicas.Item{Value: []byte("v3"), Version: 3}, nil
		})
		if err != nil {
			t.Error(err)
		}
		bDone <- it
	}()
	<-bStarted // B holds the lease now
	close(aGo)
	seen := <-aDone
	close(bGo)
	<-bDone
	it, err := a.Get(ctx, key)
	require.NoError(t, err)
	require.GreaterOrEqual(t, it.Version, seen.Version, "A's caller saw v%d, a later read v%d", seen.Version, it.Version)
}

// Promote racing Set: the promoting instance registers its copies and reads v1, then its
// warm-up is held back; an instance to which the key is not hot sets v2 for a short while,
// and v2 expires. The warm-up landing late must not bring v1 back, and the next Set by
// the other instance still reaches the promoted copies.
func TestHeldBackPromoteNeverBringsBackAnOlderVersion(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		key := prefix + "post:promoted"
		hold := newHoldBack()
		p := newReplicator(t, hooked(t, f, hold), replicas.Options{Prefix: prefix, Copies: 3})
		w := newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Copies: 3})
		ctx := testkit.Ctx(t)
		require.NoError(t, w.Set(ctx, key, []byte("v1"), 1, time.Minute))

		hold.armed.Store(true)
		promoted := make(chan error, 1)
		go func() { promoted <- p.Promote(ctx, key) }()
		<-hold.held // registered and read v1; the warm-up is in flight
		require.NoError(t, w.Set(ctx, key, []byte("v2"), 2, 150*time.Millisecond))
		require.Eventually(t, func() bool {
			_, err := w.Get(ctx, key)
			return errors.Is(err, replicas.ErrNotFound)
		}, 30*time.Second, 10*time.Millisecond, "v2 expires")
		close(hold.release)
		require.NoError(t, <-promoted)
		require.True(t, p.IsHot(key))
		require.Equal(t, map[string]int{"miss": 30}, hotReads(t, p, key, 30), "v1 never comes back")
		require.NoError(t, w.Set(ctx, key, []byte("v3"), 3, time.Minute))
		require.Equal(t, map[string]int{"v3": 30}, hotReads(t, p, key, 30))
	})
}
