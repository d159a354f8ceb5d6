package replicas_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/replicas"
)

// After Delete of version 2 returned, a GetOrLoad whose source still has version 1 (a
// lagging database replica) must not serve version 1: the tombstone says that value is
// deleted. Hot and not hot.
func TestGetOrLoadAfterDeleteDoesNotServeOlderLoad(t *testing.T) {
	for _, hot := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "hot"}[hot], func(t *testing.T) {
			c := celebritytest.Standalone(t).Client(t)
			ctx := ctxFor(t)
			r := newReplicator(t, c, replicas.Options{Copies: 3})
			const key = "post:deleted"
			if hot {
				require.NoError(t, r.Promote(ctx, key))
			}
			require.NoError(t, r.Set(ctx, key, []byte("v1"), 1, time.Minute))
			require.NoError(t, r.Delete(ctx, key, 2))
			var loads atomic.Int32
			load := func(context.Context) (replicas.Item, error) {
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
// refused (its token no longer holds the lease); its callers must still get what it loaded
// (or an error), never an empty value of version 0.
func TestZombieFillerWithLeaseGoneReturnsItsLoad(t *testing.T) {
	for _, hot := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "hot"}[hot], func(t *testing.T) {
			c := celebritytest.Standalone(t).Client(t)
			ctx := ctxFor(t)
			r := newReplicator(t, c, replicas.Options{Copies: 2, LeaseTTL: 100 * time.Millisecond})
			const key = "post:zombie"
			if hot {
				require.NoError(t, r.Promote(ctx, key))
			}
			primary := r.PrimaryKey(key)
			started := make(chan struct{})
			release := make(chan struct{})
			go func() {
				<-started
				// The lease (in the primary's key) expires while the loader runs.
				require.Eventually(t, func() bool { return c.Exists(ctx, primary).Val() == 0 },
					20*time.Second, 5*time.Millisecond)
				close(release)
			}()
			it, err := r.GetOrLoad(ctx, key, time.Minute, func(context.Context) (replicas.Item, error) {
				close(started)
				<-release
				return replicas.Item{Value: []byte("v1"), Version: 1}, nil
			})
			require.NoError(t, err)
			require.Equal(t, replicas.Item{Value: []byte("v1"), Version: 1}, it)
		})
	}
}
