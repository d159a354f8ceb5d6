package replicas_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestPrefixesAreSeparateCaches: the prefix names a cache, primary record included, so two
// instances configured with different prefixes never share a record whose registry names
// copies under the other's prefix. Neither ever reads a version older than one its own
// cache acknowledged, and each loads a missing key through its own lease.
func TestPrefixesAreSeparateCaches(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "post:7"
		a := newReplicator(t, f.client(t), replicas.Options{Prefix: celebritytest.NewPrefix(t), Hot: []string{key}})
		b := newReplicator(t, f.client(t), replicas.Options{Prefix: celebritytest.NewPrefix(t), Hot: []string{key}})
		ctx := testkit.Ctx(t)
		require.NoError(t, a.Set(ctx, key, []byte("v1"), 1, time.Minute))
		_, err := b.Get(ctx, key)
		require.ErrorIs(t, err, replicas.ErrNotFound, "b's cache holds nothing yet")
		require.NoError(t, b.Set(ctx, key, []byte("b1"), 1, time.Minute))
		require.Equal(t, map[string]int{"b1": 20}, hotReads(t, b, key, 20))

		// a's writes never leave b reading an older version of b's own writes, and b's
		// copies are kept by b's writes alone.
		require.NoError(t, a.Set(ctx, key, []byte("v2"), 2, time.Minute))
		require.Equal(t, map[string]int{"v2": 20}, hotReads(t, a, key, 20))
		require.Equal(t, map[string]int{"b1": 20}, hotReads(t, b, key, 20))
		require.NoError(t, b.Set(ctx, key, []byte("b2"), 2, time.Minute))
		require.Equal(t, map[string]int{"b2": 20}, hotReads(t, b, key, 20))
		require.NoError(t, b.Delete(ctx, key, 3))
		require.Equal(t, map[string]int{"miss": 20}, hotReads(t, b, key, 20))
		require.Equal(t, map[string]int{"v2": 20}, hotReads(t, a, key, 20))
		_, err = a.Get(ctx, key)
		require.False(t, errors.Is(err, replicas.ErrNotFound))
	})
}

// TestFleetKeyRefusesAnotherPrefix: instances that name one fleet roll (Options.FleetKey)
// must share a prefix. An instance with another prefix is refused by New while the first
// prefix's instances live, whether they renew their entries (running), leave (Close) or
// stop renewing (killed); once the roll is free it is enrolled and the others are refused.
func TestFleetKeyRefusesAnotherPrefix(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		ctx := testkit.Ctx(t)
		c := f.client(t)
		roll := celebritytest.NewPrefix(t) + "roll"
		p1, p2 := celebritytest.NewPrefix(t)+"one:", celebritytest.NewPrefix(t)+"two:"
		o := func(prefix string) replicas.Options {
			return replicas.Options{Prefix: prefix, FleetKey: roll, FleetInterval: 500 * time.Millisecond}
		}
		a1, err := replicas.New(c, o(p1))
		require.NoError(t, err)
		a2, err := replicas.New(c, o(p1))
		require.NoError(t, err, "the same prefix joins the fleet")

		refused := func(prefix string) error {
			t.Helper()
			r, err := replicas.New(c, o(prefix))
			if err == nil {
				require.NoError(t, r.Close())
			}
			return err
		}
		err = refused(p2)
		require.ErrorIs(t, err, replicas.ErrPrefixMismatch)
		require.ErrorContains(t, err, p1)
		require.ErrorContains(t, err, p2)
		// The first prefix's instances renew their entries: still refused after several
		// entry lives (3 FleetIntervals each).
		time.Sleep(2 * time.Second)
		require.ErrorIs(t, refused(p2), replicas.ErrPrefixMismatch)

		require.NoError(t, a1.Close())
		require.ErrorIs(t, refused(p2), replicas.ErrPrefixMismatch, "one instance of the first prefix still lives")
		require.NoError(t, a2.Close())

		// Every instance of the first prefix left: the other prefix may enroll.
		b, err := replicas.New(c, o(p2))
		require.NoError(t, err)
		require.ErrorIs(t, refused(p1), replicas.ErrPrefixMismatch)
		require.NoError(t, b.Close())

		// A killed instance (an entry nobody renews) holds the roll until its life ends: 3s,
		// so that the refusal below still comes before its end on a loaded machine.
		now, err := c.Time(ctx).Result()
		require.NoError(t, err)
		require.NoError(t, c.ZAdd(ctx, roll, redis.Z{Score: float64(now.Add(3 * time.Second).UnixMilli()), Member: "killed:" + p1}).Err())
		require.ErrorIs(t, refused(p2), replicas.ErrPrefixMismatch)
		require.Eventually(t, func() bool { return refused(p2) == nil }, 30*time.Second, 20*time.Millisecond)
	})
}

// TestWithoutFleetKeyNewDoesNoIO: the roll is opt-in; without it New never touches Redis,
// so it works with the server down.
func TestWithoutFleetKeyNewDoesNoIO(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	r, err := replicas.New(c, replicas.Options{})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	_, err = replicas.New(c, replicas.Options{FleetKey: "roll"})
	require.Error(t, err, "with a roll, New must reach Redis")
	require.False(t, errors.Is(err, replicas.ErrPrefixMismatch))
}
