package escrow

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/stretchr/testify/require"
)

// With a stock client (go-redis waits its ReadTimeout and retries, about 5s, whatever the
// context says) and the ledgers' server stopped, every I/O method of Pool, Central and
// Rebalancer returns by its ctx's deadline plus 50ms, and a ctx cancelled without a
// deadline ends the call as promptly.
func TestCallsReturnByTheirDeadlineWithAPausedServer(t *testing.T) {
	celebritytest.Long(t)
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	wit := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	c := srv.Client(t)
	prefix := celebritytest.NewPrefix(t)
	pool, err := NewPool(c, PoolOptions{Name: "jobs", Capacity: 4, Prefix: prefix, Witness: wit.Client(t),
		Owners: []Owner{{Name: "a", First: 1, Last: 2}, {Name: "b", First: 3, Last: 4}}, AllowWeakDurability: true})
	require.NoError(t, err)
	require.NoError(t, pool.Init(t.Context()))
	central, err := NewCentral(c, CentralOptions{Name: "limit", Capacity: 2, Prefix: prefix, AllowWeakDurability: true})
	require.NoError(t, err)
	require.NoError(t, central.Init(t.Context()))
	reb, err := NewRebalancer(pool, RebalanceOptions{})
	require.NoError(t, err)
	_, err = pool.Acquire(t.Context(), "a", "held")
	require.NoError(t, err)

	calls := map[string]func(ctx context.Context) error{
		"Pool.Init":        pool.Init,
		"Pool.Acquire":     func(ctx context.Context) error { _, err := pool.Acquire(ctx, "a", "j"); return err },
		"Pool.Release":     func(ctx context.Context) error { return pool.Release(ctx, "a", "held") },
		"Pool.Renew":       func(ctx context.Context) error { _, err := pool.Renew(ctx, "a", "held"); return err },
		"Pool.Sweep":       func(ctx context.Context) error { _, err := pool.Sweep(ctx); return err },
		"Pool.Holders":     func(ctx context.Context) error { _, err := pool.Holders(ctx, "a"); return err },
		"Pool.Audit":       func(ctx context.Context) error { _, err := pool.Audit(ctx); return err },
		"Pool.Reconcile":   func(ctx context.Context) error { return pool.Reconcile(ctx, "a") },
		"Pool.Recover":     func(ctx context.Context) error { _, err := pool.Recover(ctx); return err },
		"Pool.Transfer":    func(ctx context.Context) error { return pool.Transfer(ctx, "a", "b", 1, "t1") },
		"Pool.Cancel":      func(ctx context.Context) error { return pool.Cancel(ctx, "a", "t1") },
		"Rebalancer.Step":  func(ctx context.Context) error { _, err := reb.Step(ctx); return err },
		"Central.Init":     central.Init,
		"Central.Acquire":  func(ctx context.Context) error { _, err := central.Acquire(ctx, "j"); return err },
		"Central.Release":  func(ctx context.Context) error { return central.Release(ctx, "j") },
		"Central.Renew":    func(ctx context.Context) error { _, err := central.Renew(ctx, "j"); return err },
		"Central.Sweep":    func(ctx context.Context) error { _, err := central.Sweep(ctx); return err },
		"Central.Holders":  func(ctx context.Context) error { _, err := central.Holders(ctx); return err },
		"Central.Audit":    func(ctx context.Context) error { _, err := central.Audit(ctx); return err },
		"Central.Restore":  central.RestoreLost,
		"Pool.RestoreLost": func(ctx context.Context) error { _, err := pool.RestoreLost(ctx, "a", "r1"); return err },
		"Rebalancer.Run":   reb.Run,
	}
	srv.Pause()
	defer srv.Resume()
	celebritytest.RequireReturnsByDeadline(t, 300*time.Millisecond, calls)
}
