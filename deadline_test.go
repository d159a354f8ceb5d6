package celebrity_test

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/replicas"
	"github.com/stretchr/testify/require"
)

// With a stock client (go-redis waits its ReadTimeout and retries, about 5s, whatever the
// context says) and the server stopped, the read path's calls return by their ctx's
// deadline plus 50ms, and a ctx cancelled without a deadline ends them as promptly: the
// Cache (default options: its fleet loop on), and the Replicator under it.
func TestReadPathReturnsByItsDeadlineWithAPausedServer(t *testing.T) {
	celebritytest.Long(t)
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	src := newSource()
	src.write("post:1", "v1")
	prefix := celebritytest.NewPrefix(t)
	cache, err := celebrity.New(srv.Client(t), src.load, celebrity.Options[string]{Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cache.Close() })
	require.NoError(t, cache.Ready(t.Context()))
	rep, err := replicas.New(srv.Client(t), replicas.Options{Prefix: prefix + "rep:"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rep.Close() })
	load := func(context.Context, string) (replicas.Item, error) {
		return replicas.Item{Value: []byte("x"), Version: 1}, nil
	}

	srv.Pause()
	defer srv.Resume()
	n := 0
	fresh := func(p string) string {
		n++
		return p + ":" + string(rune('a'+n%26)) + time.Now().Format("150405.000000000")
	}
	celebritytest.RequireReturnsByDeadline(t, 300*time.Millisecond, map[string]func(ctx context.Context) error{
		"Cache.Get": func(ctx context.Context) error { _, err := cache.Get(ctx, fresh("post")); return err },
		"Cache.GetMany": func(ctx context.Context) error {
			_, err := cache.GetMany(ctx, []string{fresh("a"), fresh("b")})
			return err
		},
		"Cache.Set":     func(ctx context.Context) error { return cache.Set(ctx, "post:1", "v2", 2) },
		"Cache.Delete":  func(ctx context.Context) error { return cache.Delete(ctx, "post:1", 3) },
		"Cache.Promote": func(ctx context.Context) error { return cache.Promote(ctx, "post:1") },
		"Cache.Demote":  func(ctx context.Context) error { return cache.Demote(ctx, "post:1") },
		"ReadHotSet": func(ctx context.Context) error {
			_, err := celebrity.ReadHotSet(ctx, srv.Client(t), prefix)
			return err
		},
		"Rep.GetOrLoad": func(ctx context.Context) error {
			_, err := rep.GetOrLoad(ctx, fresh("k"), time.Minute, load)
			return err
		},
		"Rep.Get":     func(ctx context.Context) error { _, err := rep.Get(ctx, "k"); return err },
		"Rep.Set":     func(ctx context.Context) error { return rep.Set(ctx, "k", []byte("y"), 2, time.Minute) },
		"Rep.Delete":  func(ctx context.Context) error { return rep.Delete(ctx, "k", 3) },
		"Rep.Promote": func(ctx context.Context) error { return rep.Promote(ctx, "k") },
		"Rep.Refresh": rep.Refresh,
		"Rep.GetOrLoadMany": func(ctx context.Context) error {
			_, _, err := rep.GetOrLoadMany(ctx, []string{fresh("m"), fresh("n")}, time.Minute,
				func(ctx context.Context, keys []string) (map[string]replicas.Item, error) { return nil, nil })
			return err
		},
	})
}
