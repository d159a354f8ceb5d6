package escrow

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

func TestRebalancerMovesIdlePermitsToBusyOwnersWithHysteresis(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 40, Owners: owners(40, "a", "b")})
		r, err := NewRebalancer(p, RebalanceOptions{Low: 2, High: 10, Batch: 5})
		require.NoError(t, err)
		moved, err := r.Step(ctx)
		require.NoError(t, err)
		require.Zero(t, moved, "nobody is busy")

		for i := range 18 {
			_, err := p.Acquire(ctx, "b", fmt.Sprint("job", i))
			require.NoError(t, err)
		}
		moved, err = r.Step(ctx)
		require.NoError(t, err)
		require.Equal(t, 5, moved)
		require.Equal(t, 15, freeAt(t, p, "a"))
		require.Equal(t, 7, freeAt(t, p, "b"))
		for range 3 {
			moved, err = r.Step(ctx)
			require.NoError(t, err)
			require.Zero(t, moved, "no move back and forth once b is above Low")
		}
		requireClean(t, p)
	})
}

func TestRebalancerFinishesATransferLeftPending(t *testing.T) {
	ctx := testkit.Ctx(t)
	p := newTestPool(t, celebritytest.Standalone(t).Client(t), PoolOptions{Capacity: 20, Owners: owners(20, "a", "b")})
	_, err := p.Freeze(ctx, "a", "b", 3, "crashed")
	require.NoError(t, err)
	r, err := NewRebalancer(p, RebalanceOptions{Low: 1, High: 30, Batch: 2})
	require.NoError(t, err)
	moved, err := r.Step(ctx)
	require.NoError(t, err)
	require.Zero(t, moved)
	rep := requireClean(t, p)
	require.Empty(t, rep.Pending)
	require.Equal(t, 13, rep.Owners[1].Free)
}

func TestRebalancerRunStopsWithItsContext(t *testing.T) {
	p := newTestPool(t, celebritytest.Standalone(t).Client(t), PoolOptions{Capacity: 20, Owners: owners(20, "a", "b")})
	ctx := testkit.Ctx(t)
	for i := range 10 {
		_, err := p.Acquire(ctx, "b", fmt.Sprint("job", i))
		require.NoError(t, err)
	}
	r, err := NewRebalancer(p, RebalanceOptions{Low: 0, High: 5, Batch: 2, Interval: time.Millisecond})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	require.Eventually(t, func() bool { return p.Stats().Completed > 0 }, 30*time.Second, 5*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.True(t, errors.Is(err, context.Canceled), "got %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	requireClean(t, p)
}

func TestRebalanceOptionsAreValidated(t *testing.T) {
	p, err := NewPool(celebritytest.Standalone(t).Client(t), PoolOptions{Name: "p", Capacity: 20, Owners: owners(20, "a", "b")})
	require.NoError(t, err)
	_, err = NewRebalancer(p, RebalanceOptions{Low: 2, High: 4, Batch: 2})
	require.ErrorContains(t, err, "RebalanceOptions.High must be > Low+Batch (4), got 4")
	_, err = NewRebalancer(p, RebalanceOptions{Batch: 21})
	require.ErrorContains(t, err, "RebalanceOptions.Batch must be 1..20, got 21")
	_, err = NewRebalancer(p, RebalanceOptions{Low: -1})
	require.ErrorContains(t, err, "RebalanceOptions.Low must be >= 0")
	r, err := NewRebalancer(p, RebalanceOptions{})
	require.NoError(t, err)
	require.Equal(t, RebalanceOptions{Low: 0, High: 2, Batch: 1, Interval: DefaultRebalanceInterval, Rand: r.opts.Rand}, r.opts)
}
