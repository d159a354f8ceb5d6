package replicas_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestMissCostsTwoRoundTrips: a GetOrLoad miss of a key that is not hot is one script that
// returns the value or takes the lease, then the fill; a hit is the first of those alone.
func TestMissCostsTwoRoundTrips(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		count := &counter{}
		r := newReplicator(t, hooked(t, f, count), replicas.Options{})
		ctx := ctxFor(t)
		p := celebritytest.Prefix(t)
		load := func(context.Context) (replicas.Item, error) {
			return replicas.Item{Value: []byte("v"), Version: 1}, nil
		}
		// Scripts loaded on every node, connections open.
		for i := range 30 {
			_, err := r.GetOrLoad(ctx, p+"warm"+strconv.Itoa(i), time.Minute, load)
			require.NoError(t, err)
		}
		const keys = 20
		count.trips.Store(0)
		count.cmds.Store(0)
		for i := range keys {
			_, err := r.GetOrLoad(ctx, p+"k"+strconv.Itoa(i), time.Minute, load)
			require.NoError(t, err)
		}
		require.Equal(t, int64(2*keys), count.trips.Load(), "round trips for %d misses", keys)
		require.Equal(t, int64(2*keys), count.cmds.Load(), "commands for %d misses", keys)
		count.trips.Store(0)
		count.cmds.Store(0)
		for i := range keys {
			_, err := r.GetOrLoad(ctx, p+"k"+strconv.Itoa(i), time.Minute, load)
			require.NoError(t, err)
		}
		require.Equal(t, int64(keys), count.trips.Load(), "round trips for %d hits", keys)
		require.Equal(t, int64(keys), count.cmds.Load(), "commands for %d hits", keys)
	})
}
