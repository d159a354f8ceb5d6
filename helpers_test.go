package celebrity_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

func TestMain(m *testing.M) {
	// CELEBRITYTEST_ACL=celebrity runs every test as a user holding only the rule of a Cache
	// with every option that widens it, for a prefix pattern covering the prefixes the tests
	// build with celebritytest.Prefix.
	celebritytest.RegisterRule("celebrity", func(p string) []string {
		return celebrity.ACLRule(celebrity.Options[string]{Prefix: p + "*",
			Loop: celebrity.LoopOptions{PromoteShare: 0.5}})
	})
	// The runnable examples use the shared standalone server; the kit stops it at the end.
	os.Setenv("REDIS_ADDR", celebritytest.Standalone(celebritytest.ForMain()).Addr())
	celebritytest.Main(m)
}

// source is the host's database: values with versions, and a count of loads per key.
type source struct {
	mu    sync.Mutex
	rows  map[string]row
	loads sync.Map // key -> *atomic.Int64
}

type row struct {
	v       string
	version uint64
}

func newSource() *source { return &source{rows: map[string]row{}} }

// write stores a new version of key and returns it (the host's database write).
func (s *source) write(key, v string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[key]
	r.version++
	r.v = v
	s.rows[key] = r
	return r.version
}

// bump writes the next version of key with the value "v<version>" and returns the version.
func (s *source) bump(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[key]
	r.version++
	r.v = "v" + strconv.FormatUint(r.version, 10)
	s.rows[key] = r
	return r.version
}

func (s *source) load(_ context.Context, key string) (celebrity.Versioned[string], error) {
	n, _ := s.loads.LoadOrStore(key, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[key]
	if !ok || r.v == "" { // never written, or deleted
		return celebrity.Versioned[string]{}, fmt.Errorf("row %q: %w", key, celebrity.ErrNotFound)
	}
	return celebrity.Versioned[string]{Value: r.v, Version: r.version}, nil
}

func (s *source) loadsOf(key string) int64 {
	n, ok := s.loads.Load(key)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// deployment hands out independent clients (one per simulated instance) of one Redis.
type deployment struct {
	name    string
	cluster bool
	client  func(t testing.TB) redis.UniversalClient
}

// deployments runs fn on the shared standalone server and on the shared 3-master cluster.
func deployments(t *testing.T, fn func(t *testing.T, d deployment)) {
	t.Run("standalone", func(t *testing.T) {
		srv := celebritytest.Standalone(t)
		fn(t, deployment{name: "standalone", client: func(t testing.TB) redis.UniversalClient { return srv.Client(t) }})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := celebritytest.SharedCluster(t)
		fn(t, deployment{name: "cluster", cluster: true, client: func(t testing.TB) redis.UniversalClient { return cl.Client(t) }})
	})
}

// newCache builds one instance under prefix, closed when t ends.
func newCache(t testing.TB, c redis.UniversalClient, src *source, prefix string, o celebrity.Options[string]) *celebrity.Cache[string] {
	t.Helper()
	o.Prefix = prefix
	if o.Loop.ReportInterval == 0 {
		o.Loop.ReportInterval = -1
	}
	cache, err := celebrity.New(c, src.load, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cache.Close() })
	require.NoError(t, cache.Ready(t.Context()))
	return cache
}

// versionOf parses the version the test stores in every value ("v<version>").
func versionOf(t testing.TB, v string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(v[1:], 10, 64)
	require.NoError(t, err, "value %q", v)
	return n
}

func strconvU(n uint64) string { return strconv.FormatUint(n, 10) }
