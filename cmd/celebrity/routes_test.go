package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/routing"
)

// routesFixture is a control Redis and two shards, with the route table under a prefix of
// the test's own.
type routesFixture struct {
	control      *celebritytest.Server
	shards       []*celebritytest.Server
	prefix       string
	shardFlag    string
	controlFlags []string
}

func newRoutesFixture(t *testing.T) *routesFixture {
	f := &routesFixture{control: celebritytest.Standalone(t), shards: celebritytest.Shards(t, 2)}
	f.prefix = strings.NewReplacer("{", "", "}", "").Replace(celebritytest.NewPrefix(t)) + "routing"
	f.shardFlag = "a=" + f.shards[0].Addr() + ",b=" + f.shards[1].Addr()
	f.controlFlags = []string{"--addr", f.control.Addr(), "--prefix", f.prefix}
	return f
}

func (f *routesFixture) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return cli(t, stdin, nil, append(args, f.controlFlags...)...)
}

func (f *routesFixture) generation(t *testing.T) uint64 {
	t.Helper()
	r := f.run(t, "", "routes", "show", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	return decodeJSON[routing.Table](t, r.stdout).Generation
}

// router writes through the real library, so the CLI's checks see real records.
func (f *routesFixture) router(t *testing.T) *routing.Router {
	r, err := routing.New(f.control.Client(t), routing.Options{Prefix: f.prefix, Shards: map[string]routing.ShardClient{
		"a": f.shards[0].Client(t), "b": f.shards[1].Client(t)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	_, err = r.Await(t.Context(), 1)
	require.NoError(t, err)
	_, err = r.Provision(t.Context())
	require.NoError(t, err)
	return r
}

func TestRoutesInitShowAndWrongPrefix(t *testing.T) {
	f := newRoutesFixture(t)
	r := f.run(t, "", "routes", "show")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no route table under prefix")

	r = f.run(t, "", "routes", "init", "--buckets", "16", "--yes", "a", "b")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "published generation 1")
	require.Equal(t, uint64(1), f.generation(t))

	r = f.run(t, "", "routes", "show")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "buckets 0..7 -> a")
	require.Contains(t, r.stdout, "buckets 8..15 -> b")

	r = f.run(t, "", "routes", "init", "--buckets", "16", "--yes", "a", "b")
	require.Equal(t, 2, r.code, "a second init is refused")
	require.Contains(t, r.stderr, "a route table exists")
}

// TestRoutesOverrideRefusesToHideATenantsData: a tenant with acknowledged records in its
// bucket cannot be re-placed by a publish; it needs a migration. The table is unchanged.
func TestRoutesOverrideRefusesToHideATenantsData(t *testing.T) {
	f := newRoutesFixture(t)
	require.Equal(t, 0, f.run(t, "", "routes", "init", "--buckets", "16", "--yes", "a", "b").code)
	rt := f.router(t)
	_, err := rt.Do(t.Context(), "acme", "op-1", routing.Put("order:1", "paid"))
	require.NoError(t, err)
	owner := rt.Table().Owner(routing.BucketUnit(routing.BucketOf("acme", 16)))
	other := map[string]string{"a": "b", "b": "a"}[owner]

	r := f.run(t, "", "routes", "override", "acme", other, "--yes")
	require.Equal(t, 1, r.code, "without shard addresses the check cannot be made")
	require.Contains(t, r.stderr, "cannot check that tenant \"acme\" has no records")

	r = f.run(t, "", "routes", "override", "acme", other, "--yes", "--shard", f.shardFlag)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "tenant \"acme\" has records in bucket")
	require.Contains(t, r.stderr, "celebrity migrate start")
	require.Equal(t, uint64(1), f.generation(t), "nothing was published")

	// A tenant with no records can get an override; the operator confirms on stdin.
	r = f.run(t, "no\n", "routes", "override", "newshop", other, "--shard", f.shardFlag)
	require.Equal(t, 2, r.code, "answering no publishes nothing")
	require.Equal(t, uint64(1), f.generation(t))
	r = f.run(t, "yes\n", "routes", "override", "newshop", other, "--shard", f.shardFlag)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `+ tenant "newshop" -> `+other)
	require.Equal(t, uint64(2), f.generation(t))
}

func TestRoutesPublishRefusesToMoveABucket(t *testing.T) {
	f := newRoutesFixture(t)
	require.Equal(t, 0, f.run(t, "", "routes", "init", "--buckets", "16", "--yes", "a", "b").code)
	next := routing.EvenTable(2, 16, "a", "b")
	next.SetBucket(0, "b")
	path := t.TempDir() + "/next.json"
	writeJSON(t, path, next)

	r := f.run(t, "", "routes", "diff", "--file", path)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "bucket 0 has its data on a")

	r = f.run(t, "", "routes", "publish", "--file", path, "--yes", "--cache")
	require.Equal(t, 0, r.code, "a pure cache may be re-placed: %s", r.stderr)
	require.Contains(t, r.stdout, "~ bucket 0: a -> b")
	require.Equal(t, uint64(2), f.generation(t))
}

func TestRoutesBadInputChangesNothing(t *testing.T) {
	f := newRoutesFixture(t)
	require.Equal(t, 0, f.run(t, "", "routes", "init", "--buckets", "16", "--yes", "a", "b").code)
	for name, args := range map[string][]string{
		"non-UTF-8 tenant": {"routes", "override", "shop\xff", "b", "--yes", "--shard", f.shardFlag},
		"unknown shard":    {"routes", "override", "shop", "zzz", "--yes", "--shard", f.shardFlag},
		"one-wide spread":  {"routes", "spread", "shop", "a", "--yes"},
		"bad subcommand":   {"routes", "frob"},
		"bad --shard":      {"routes", "override", "shop", "b", "--yes", "--shard", "a"},
	} {
		t.Run(name, func(t *testing.T) {
			r := f.run(t, "", args...)
			require.Equal(t, 2, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
			require.NotEmpty(t, r.stderr)
			require.Equal(t, uint64(1), f.generation(t))
		})
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}
