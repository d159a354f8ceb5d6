package replicas_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestMissCostsTwoRoundTrips: a GetOrLoad miss of a key that is not hot is one script that
// returns the value or takes the lease, then the fill; a hit is the first of those alone.
func TestMissCostsTwoRoundTrips(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		count := &counter{}
		r := newReplicator(t, hooked(t, f, count), replicas.Options{})
		ctx := testkit.Ctx(t)
		p := celebritytest.NewPrefix(t)
		load := func(context.Context, string) (replicas.Item, error) {
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

// TestMissCostsThreeServerCommands: what the server executes for a GetOrLoad miss of a key
// that is not hot, scripts' own commands included, is the lease command (SET NX GET), the
// fill script and the one write inside it that swaps the lease for the record; a hit is the
// lease command alone. The naive GET-then-SET costs 2 and 1.
func TestMissCostsThreeServerCommands(t *testing.T) {
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	r := newReplicator(t, s.Client(t), replicas.Options{})
	ctx := testkit.Ctx(t)
	load := func(context.Context, string) (replicas.Item, error) {
		return replicas.Item{Value: []byte("v"), Version: 1}, nil
	}
	for i := range 10 { // scripts loaded, connections open
		_, err := r.GetOrLoad(ctx, "warm"+strconv.Itoa(i), time.Minute, load)
		require.NoError(t, err)
	}
	addrs := []string{s.Addr()}
	const keys = 20
	for _, phase := range []struct {
		name string
		cmds float64
	}{{"misses", 3}, {"hits", 1}} {
		before := serverCalls(t, addrs)
		for i := range keys {
			_, err := r.GetOrLoad(ctx, "k"+strconv.Itoa(i), time.Minute, load)
			require.NoError(t, err)
		}
		require.Equal(t, phase.cmds*keys, serverCalls(t, addrs)-before, "server commands for %d %s", keys, phase.name)
	}
	for i := range keys {
		got, err := r.Get(ctx, "k"+strconv.Itoa(i))
		require.NoError(t, err)
		require.Equal(t, replicas.Item{Value: []byte("v"), Version: 1}, got)
		ttl, err := s.Client(t).PTTL(ctx, r.PrimaryKey("k"+strconv.Itoa(i))).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, 30*time.Second, "the filled value lives the ttl it was loaded with")
	}
}
