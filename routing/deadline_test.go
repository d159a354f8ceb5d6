package routing_test

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/routing"
	"github.com/stretchr/testify/require"
)

// With stock clients (go-redis waits its ReadTimeout and retries, about 5s, whatever the
// context says), a Router's calls return by their ctx's deadline plus 50ms, and a ctx
// cancelled without a deadline ends them as promptly: with the shard stopped (Do, Get and
// the shard's own calls), then with the control Redis stopped (the Store, Await,
// Provision).
func TestCallsReturnByTheirDeadlineWithAPausedServer(t *testing.T) {
	celebritytest.Long(t)
	ctl, shard := celebritytest.NewServer(t, celebritytest.ServerOptions{}), celebritytest.NewServer(t, celebritytest.ServerOptions{})
	p := prefix(t)
	a := shard.Client(t)
	r, err := routing.New(ctl.Client(t), routing.Options{Prefix: p, Shards: map[string]routing.ShardClient{"a": a}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	store, err := routing.NewStore(ctl.Client(t), routing.StoreOptions{Prefix: p})
	require.NoError(t, err)
	require.NoError(t, store.Publish(t.Context(), routing.EvenTable(1, 16, "a")))
	_, err = r.Await(t.Context(), 1)
	require.NoError(t, err)
	_, err = r.Provision(t.Context())
	require.NoError(t, err)
	_, err = r.Do(t.Context(), "acme", "op-1", routing.Put("seat:1", "x"))
	require.NoError(t, err)
	sh, err := routing.NewShard("a", a, routing.ShardOptions{Prefix: p})
	require.NoError(t, err)
	u := routing.BucketUnit(routing.BucketOf("acme", 16))

	shard.Pause()
	celebritytest.RequireReturnsByDeadline(t, 300*time.Millisecond, map[string]func(ctx context.Context) error{
		"Router.Do": func(ctx context.Context) error {
			_, err := r.Do(ctx, "acme", "op-2", routing.Put("seat:2", "y"))
			return err
		},
		"Router.Get": func(ctx context.Context) error { _, _, err := r.Get(ctx, "acme", "seat:1"); return err },
		"Shard.Exec": func(ctx context.Context) error {
			_, err := sh.Exec(ctx, u, 1, "acme", "op-3", routing.Put("seat:3", "z"))
			return err
		},
		"Shard.Get":       func(ctx context.Context) error { _, _, err := sh.Get(ctx, u, 1, "acme", "seat:1"); return err },
		"Shard.Ownership": func(ctx context.Context) error { _, _, err := sh.Ownership(ctx, u); return err },
	})
	shard.Resume()

	ctl.Pause()
	defer ctl.Resume()
	next := routing.EvenTable(2, 16, "a")
	celebritytest.RequireReturnsByDeadline(t, 300*time.Millisecond, map[string]func(ctx context.Context) error{
		"Store.Load":       func(ctx context.Context) error { _, err := store.Load(ctx); return err },
		"Store.Publish":    func(ctx context.Context) error { return store.Publish(ctx, next) },
		"Router.Await":     func(ctx context.Context) error { _, err := r.Await(ctx, 2); return err },
		"Router.Provision": func(ctx context.Context) error { _, err := r.Provision(ctx); return err },
	})
}
