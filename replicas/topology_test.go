package replicas_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

func TestFailoverRecomputesLayoutWithoutMisses(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel() // a dedicated cluster: runs alongside the other dedicated-cluster test
	c := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Replicas: true})
	client := c.Client(t)
	key := celebritytest.NewPrefix(t) + "post:ronaldo"
	r := newReplicator(t, client, replicas.Options{Copies: 3, Hot: []string{key}, RefreshInterval: 20 * time.Millisecond})
	ctx := testkit.Ctx(t)
	require.NoError(t, r.Set(ctx, key, []byte("v1"), 1, time.Minute))
	before, err := r.CopyKeys(ctx, key)
	require.NoError(t, err)

	c.Failover(t, 0) // master 0's replica takes its slots: the slot map changes
	require.Eventually(t, func() bool { return r.Stats().LayoutReloads >= 1 }, 30*time.Second, 10*time.Millisecond)

	after, err := r.CopyKeys(ctx, key)
	require.NoError(t, err)
	masters := map[string]bool{}
	for _, k := range after {
		masters[c.MasterOf(k).Addr()] = true
	}
	require.Len(t, masters, 3, "copies on the three current masters: %v", after)
	// The promoted replica owns the same slots: the layout is recomputed, and it only moves
	// copies if the masters' address order changed.
	t.Logf("layout before %v, after %v", before, after)
	for range 30 {
		it, err := r.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, "v1", string(it.Value))
	}
	require.Zero(t, r.Stats().Misses)
	// The new layout is registered: a write reaches it.
	require.NoError(t, r.Set(ctx, key, []byte("v2"), 2, time.Minute))
	for _, k := range after {
		v, _, _ := stored(t, client, k)
		require.Equal(t, uint64(2), v, k)
	}
}

func TestCopiesOfAnAbandonedLayoutExpire(t *testing.T) {
	celebritytest.Long(t)
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "k"
		prefix := celebritytest.NewPrefix(t)
		c := f.client(t)
		ctx := testkit.Ctx(t)
		// An instance with N=6 registers six copies for a short while (long enough for the
		// first write of N=3 below to come inside it on a loaded machine), then goes away.
		const short = 3 * time.Second
		six := newReplicator(t, c, replicas.Options{Prefix: prefix, Copies: 6, Hot: []string{key}})
		require.NoError(t, six.Set(ctx, key, []byte("v1"), 1, short))
		sixKeys, err := six.CopyKeys(ctx, key)
		require.NoError(t, err)
		require.NoError(t, six.Close())

		// The fleet now runs N=3 and keeps writing with a long TTL.
		three := newReplicator(t, c, replicas.Options{Prefix: prefix, Copies: 3, Hot: []string{key}})
		require.NoError(t, three.Set(ctx, key, []byte("v2"), 2, time.Minute))
		for i, k := range sixKeys {
			pttl, err := c.PTTL(ctx, k).Result()
			require.NoError(t, err)
			if i < 3 {
				require.Greater(t, pttl, 30*time.Second, "copy %d is the N=3 layout's", i)
			} else {
				require.LessOrEqual(t, pttl, short, "copy %d lives no longer than its registration", i)
			}
		}
		admin := celebritytest.AdminOf(t, c) // EXISTS is not in the package's rule
		live := func() int64 {
			var n int64
			for _, k := range sixKeys[3:] {
				e, err := admin.Exists(ctx, k).Result()
				require.NoError(t, err)
				n += e
			}
			return n
		}
		// Copies expire a little before their registration, and a write inside that gap
		// rewrites them for what remains of it. Once the registration is over, a write drops
		// it from the logical key's registry, and from then on no write recreates them.
		registered := func() bool {
			raw, err := c.Get(ctx, three.PrimaryKey(key)).Result()
			require.NoError(t, err)
			registry := strings.Split(raw, ",")[4]
			for _, k := range sixKeys[3:] {
				for _, entry := range strings.Split(registry, ".") {
					if strings.HasPrefix(entry, strconv.Itoa(int(slot.Of(k)))+":") {
						return true
					}
				}
			}
			return false
		}
		require.True(t, registered())
		version := uint64(2)
		require.Eventually(t, func() bool {
			version++
			require.NoError(t, three.Set(ctx, key, []byte("v"), version, time.Minute))
			return !registered()
		}, 30*time.Second, 20*time.Millisecond)
		require.Eventually(t, func() bool { return live() == 0 }, 30*time.Second, 20*time.Millisecond)
		version++
		require.NoError(t, three.Set(ctx, key, []byte("v"), version, time.Minute))
		require.Zero(t, live(), "writers stop writing copies nobody registers")
		for _, k := range sixKeys[:3] {
			v, _, _ := stored(t, c, k)
			require.Equal(t, version, v)
		}
	})
}

func TestCloseEndsFetchesInFlight(t *testing.T) {
	s := celebritytest.Standalone(t)
	key := celebritytest.NewPrefix(t) + "k"
	prefix := celebritytest.NewPrefix(t)
	holder := newReplicator(t, s.Client(t), replicas.Options{Prefix: prefix, LeaseTTL: time.Minute})
	waiter, err := replicas.New(s.Client(t), replicas.Options{Prefix: prefix})
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	load := stuckLoader(started, release, replicas.Item{Value: []byte("x"), Version: 1}, replicas.Item{}, &calls)
	go func() { _, _ = holder.GetOrLoad(context.Background(), key, 0, load) }()
	<-started
	done := make(chan error, 1)
	go func() {
		_, err := waiter.GetOrLoad(context.Background(), key, 0, load)
		done <- err
	}()
	require.Eventually(t, func() bool { return waiter.Stats().LeaseWaits == 1 }, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, waiter.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, replicas.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the waiting fetch")
	}
	_, err = waiter.GetOrLoad(context.Background(), key, 0, load)
	require.ErrorIs(t, err, replicas.ErrClosed)
	close(release)
}
