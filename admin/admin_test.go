package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/admin"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

func TestMain(m *testing.M) { celebritytest.Main(m) }

func get(t *testing.T, srv *httptest.Server, method, path string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(b, &v), "body: %s", b)
	return resp.StatusCode, v
}

// TestHandlerServesLiveStateReadOnly mounts real components: an l1cache and a Router over a
// real control Redis with a published table.
func TestHandlerServesLiveStateReadOnly(t *testing.T) {
	control := celebritytest.Standalone(t).Client(t)
	shard := celebritytest.Shards(t, 1)[0].Client(t)
	prefix := strings.NewReplacer("{", "", "}", "").Replace(celebritytest.NewPrefix(t)) + "routing"
	store, err := routing.NewStore(control, routing.StoreOptions{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, store.Publish(t.Context(), routing.EvenTable(1, 16, "a")))
	router, err := routing.New(control, routing.Options{Prefix: prefix, Shards: map[string]routing.ShardClient{"a": shard}})
	require.NoError(t, err)
	defer router.Close()
	_, err = router.Await(t.Context(), 1)
	require.NoError(t, err)

	cache, err := l1cache.New(func(ctx context.Context, key string) (string, error) { return "v:" + key, nil },
		l1cache.Options[string]{MaxEntries: 100, Fresh: time.Minute})
	require.NoError(t, err)
	defer cache.Close()
	_, err = cache.Get(t.Context(), "a")
	require.NoError(t, err)
	_, err = cache.Get(t.Context(), "a")
	require.NoError(t, err)

	promoted := 0
	h := admin.Must(admin.Options{
		Sections: map[string]admin.Section{
			"l1":     admin.Stats(cache),
			"routes": func(context.Context) (any, error) { return router.Table(), nil },
			"broken": func(context.Context) (any, error) { return nil, errors.New("ledger unreachable") },
		},
		Actions: map[string]admin.Action{
			"promote": func(_ context.Context, r *http.Request) (any, error) {
				promoted++
				return map[string]string{"promoted": r.URL.Query().Get("key")}, nil
			},
		},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	code, idx := get(t, srv, "GET", "/")
	require.Equal(t, 200, code)
	require.Equal(t, []any{"broken", "l1", "routes"}, idx["sections"])
	require.Equal(t, []any{"promote"}, idx["actions"])

	code, l1 := get(t, srv, "GET", "/l1")
	require.Equal(t, 200, code)
	require.EqualValues(t, 1, l1["hits"], "the second Get was a hit: %v", l1)

	code, routes := get(t, srv, "GET", "/routes")
	require.Equal(t, 200, code)
	require.EqualValues(t, 1, routes["generation"])

	code, broken := get(t, srv, "GET", "/broken")
	require.Equal(t, http.StatusBadGateway, code)
	require.Equal(t, "ledger unreachable", broken["error"])

	code, all := get(t, srv, "GET", "/?all=1")
	require.Equal(t, 200, code)
	require.Contains(t, all, "l1")
	require.Equal(t, map[string]any{"error": "ledger unreachable"}, all["broken"])

	code, _ = get(t, srv, "POST", "/l1")
	require.Equal(t, http.StatusMethodNotAllowed, code, "sections are read-only")
	code, _ = get(t, srv, "GET", "/actions/promote?key=x")
	require.Equal(t, http.StatusMethodNotAllowed, code, "actions need POST")
	require.Zero(t, promoted)
	code, res := get(t, srv, "POST", "/actions/promote?key=post:7")
	require.Equal(t, 200, code)
	require.Equal(t, "post:7", res["promoted"])
	require.Equal(t, 1, promoted)
	code, _ = get(t, srv, "POST", "/actions/demote")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = get(t, srv, "GET", "/nope")
	require.Equal(t, http.StatusNotFound, code)
}

func TestSlowSectionTimesOut(t *testing.T) {
	h := admin.Must(admin.Options{Timeout: 50 * time.Millisecond, Sections: map[string]admin.Section{
		"slow": func(ctx context.Context) (any, error) { <-ctx.Done(); return nil, ctx.Err() },
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	code, v := get(t, srv, "GET", "/slow")
	require.Equal(t, http.StatusGatewayTimeout, code)
	require.Contains(t, v["error"], "deadline exceeded")
}

func TestBadOptionsNameTheField(t *testing.T) {
	ok := func(context.Context) (any, error) { return 1, nil }
	for name, o := range map[string]admin.Options{
		"Options.Sections must name":   {},
		`Options.Sections name "L1"`:   {Sections: map[string]admin.Section{"L1": ok}},
		`Options.Sections["x"] is nil`: {Sections: map[string]admin.Section{"x": nil}},
		`Options.Actions name "a/b"`:   {Sections: map[string]admin.Section{"x": ok}, Actions: map[string]admin.Action{"a/b": nil}},
	} {
		_, err := admin.New(o)
		require.ErrorIs(t, err, admin.ErrInvalid)
		require.Contains(t, err.Error(), name)
	}
}

// TestHandlerServesTheLibrarysComponents mounts what an incident needs from the service
// itself: a celebrity.Cache's hot set and stats, the migrations in flight and an escrow
// audit, each from live components on real servers.
func TestHandlerServesTheLibrarysComponents(t *testing.T) {
	control := celebritytest.Standalone(t)
	shards := celebritytest.Shards(t, 2)
	p := strings.NewReplacer("{", "", "}", "", ":", "-").Replace(celebritytest.NewPrefix(t))

	cache, err := celebrity.New(control.Client(t), func(_ context.Context, key string) (celebrity.Versioned[[]byte], error) {
		return celebrity.Versioned[[]byte]{Value: []byte("v"), Version: 1}, nil
	}, celebrity.Options[[]byte]{Prefix: p + "cache:",
		Loop: celebrity.LoopOptions{ReportInterval: -1}, PubSub: l1cache.PubSubGlobal})
	require.NoError(t, err)
	defer cache.Close()
	require.NoError(t, cache.Ready(t.Context()))
	require.NoError(t, cache.Promote(t.Context(), "post:launch"))

	store, err := routing.NewStore(control.Client(t), routing.StoreOptions{Prefix: p + "routing"})
	require.NoError(t, err)
	require.NoError(t, store.Publish(t.Context(), routing.EvenTable(1, 4, "a", "b")))
	router, err := routing.New(control.Client(t), routing.Options{Prefix: p + "routing",
		Shards: map[string]routing.ShardClient{"a": shards[0].Client(t), "b": shards[1].Client(t)}})
	require.NoError(t, err)
	defer router.Close()
	_, err = router.Await(t.Context(), 1)
	require.NoError(t, err)
	_, err = router.Provision(t.Context())
	require.NoError(t, err)
	co, err := migrate.New(control.Client(t), migrate.Options{Prefix: p + "routing",
		Shards: map[string]migrate.ShardClient{"a": shards[0].Client(t), "b": shards[1].Client(t)}})
	require.NoError(t, err)
	_, err = co.Start(t.Context(), migrate.Spec{ID: "m1", Unit: routing.BucketUnit(0), Target: "b"})
	require.NoError(t, err)

	pool, err := escrow.NewPool(control.Client(t), escrow.PoolOptions{Name: p + "video", Capacity: 4,
		Owners: []escrow.Owner{{Name: "eu", First: 1, Last: 4}}, AllowWeakDurability: true, AllowSharedWitness: true})
	require.NoError(t, err)
	require.NoError(t, pool.Init(t.Context()))
	_, err = pool.Acquire(t.Context(), "eu", "job-1")
	require.NoError(t, err)

	srv := httptest.NewServer(admin.Must(admin.Options{Sections: map[string]admin.Section{
		"hot":        func(context.Context) (any, error) { return cache.Hot(), nil },
		"cache":      admin.Stats(cache),
		"migrations": func(ctx context.Context) (any, error) { return co.Unfinished(ctx) },
		"escrow":     func(ctx context.Context) (any, error) { return pool.Audit(ctx) },
	}}))
	defer srv.Close()

	code, all := get(t, srv, "GET", "/?all=1")
	require.Equal(t, 200, code, "%v", all)
	require.Equal(t, []any{"post:launch"}, all["hot"])
	require.EqualValues(t, 1, all["cache"].(map[string]any)["hot"])
	ms := all["migrations"].([]any)
	require.Len(t, ms, 1)
	require.Equal(t, "m1", ms[0].(map[string]any)["id"])
	require.EqualValues(t, 1, all["escrow"].(map[string]any)["held"])
}
