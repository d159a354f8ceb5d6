package migrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// With stock clients (go-redis waits its ReadTimeout and retries, about 5s, whatever the
// context says), a Coordinator's calls return by their ctx's deadline plus 50ms, and a ctx
// cancelled without a deadline ends them as promptly: with the target shard stopped (a move
// and a carve-out that must copy to it), then with the control Redis stopped.
func TestCallsReturnByTheirDeadlineWithAPausedServer(t *testing.T) {
	celebritytest.Long(t)
	ctl := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	a, b := celebritytest.NewServer(t, celebritytest.ServerOptions{}), celebritytest.NewServer(t, celebritytest.ServerOptions{})
	e := newEnvOver(t, ctl.Client(t), map[string]migrate.ShardClient{"a": a.Client(t), "b": b.Client(t)}, routing.ShardOptions{})
	u := routing.BucketUnit(0)
	servers := map[string]*celebritytest.Server{"a": a, "b": b}
	from := e.openOwner(u)
	to := map[string]string{"a": "b", "b": "a"}[from]
	co := e.coordinator(migrate.Options{})
	id := "m-1"

	servers[to].Pause()
	celebritytest.RequireReturnsByDeadline(t, 300*time.Millisecond, map[string]func(ctx context.Context) error{
		"Migrate": func(ctx context.Context) error {
			_, err := co.Migrate(ctx, migrate.Spec{ID: id, Unit: u, Target: to})
			return err
		},
		"Resume":  func(ctx context.Context) error { _, err := co.Resume(ctx, id); return err },
		"Status":  func(ctx context.Context) error { _, err := co.Status(ctx, id); return err },
		"Claims":  func(ctx context.Context) error { _, err := co.Claims(ctx, u); return err },
		"Cancel":  func(ctx context.Context) error { _, err := co.Cancel(ctx, id); return err },
		"Cleanup": func(ctx context.Context) error { _, err := co.Cleanup(ctx, id); return err },
	})
	servers[to].Resume()

	ctl.Pause()
	defer ctl.Resume()
	celebritytest.RequireReturnsByDeadline(t, 300*time.Millisecond, map[string]func(ctx context.Context) error{
		"Status":     func(ctx context.Context) error { _, err := co.Status(ctx, id); return err },
		"Unfinished": func(ctx context.Context) error { _, err := co.Unfinished(ctx); return err },
		"Resume":     func(ctx context.Context) error { _, err := co.Resume(ctx, id); return err },
		"Start": func(ctx context.Context) error {
			_, err := co.Start(ctx, migrate.Spec{ID: "m-2", Unit: routing.BucketUnit(1), Target: to})
			return err
		},
	})
}
