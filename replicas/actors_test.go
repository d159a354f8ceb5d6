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
