package celebritytest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// fleet is the set of servers of one test binary. It is the only package-level state, and
// it exists because a test binary is one process: servers are shared by its tests and torn
// down by Main.
var fleet struct {
	mu       sync.Mutex
	root     string
	shards   []*Server
	cluster  *Cluster
	failed   error // why the fleet could not start; every later test reports it
	all      []*Server
	prefixes atomic.Int64
}

// rootDir returns this binary's folder for server files, creating it on first use and
// removing folders left by earlier binaries that died without tearing down.
func rootDir() (string, error) {
	if fleet.root != "" {
		return fleet.root, nil
	}
	base := filepath.Join(os.TempDir(), "celebrity-celebritytest")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("celebritytest: %w", err)
	}
	sweep(base)
	dir, err := os.MkdirTemp(base, strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("celebritytest: %w", err)
	}
	fleet.root = dir
	return dir, nil
}

// sweep removes folders whose owning process no longer exists.
func sweep(base string) {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.SplitN(e.Name(), "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
}

// unavailable ends a test that cannot get its Redis: a skip on a developer machine, a
// failure under CI.
func unavailable(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("redis-server is not available: %v\n"+
		"install it (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) "+
		"or set REDIS_SERVER to its path", err)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// track starts a server and records it for teardown. The caller holds fleet.mu.
func track(opts ServerOptions) (*Server, error) {
	root, err := rootDir()
	if err != nil {
		return nil, err
	}
	s, err := startServer(root, opts)
	if err != nil {
		return nil, err
	}
	fleet.all = append(fleet.all, s)
	return s, nil
}

// Standalone returns the binary's shared standalone server, starting it on first use.
func Standalone(t testing.TB) *Server {
	t.Helper()
	return Shards(t, 1)[0]
}

// Shards returns n shared standalone servers, each a separate shard, starting those not yet
// running. Shards(t, 1)[0] is the server Standalone returns.
func Shards(t testing.TB, n int) []*Server {
	t.Helper()
	requireLimits(t)
	fleet.mu.Lock()
	defer fleet.mu.Unlock()
	if fleet.failed != nil {
		unavailable(t, fleet.failed)
	}
	for len(fleet.shards) < n {
		s, err := track(ServerOptions{})
		if err != nil {
			fleet.failed = err
			unavailable(t, err)
		}
		fleet.shards = append(fleet.shards, s)
	}
	return append([]*Server(nil), fleet.shards[:n]...)
}

// SharedCluster returns the binary's shared 3-master Redis Cluster, starting it on first use.
// Tests must not break it; take a NewCluster for faults.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	requireLimits(t)
	fleet.mu.Lock()
	defer fleet.mu.Unlock()
	if fleet.failed != nil {
		unavailable(t, fleet.failed)
	}
	if fleet.cluster == nil {
		c, err := startCluster(ClusterOptions{})
		if err != nil {
			fleet.failed = err
			unavailable(t, err)
		}
		fleet.cluster = c
	}
	return fleet.cluster
}

// NewServer starts a dedicated server for t, stopped when t ends.
func NewServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	requireLimits(t)
	fleet.mu.Lock()
	s, err := track(opts)
	fleet.mu.Unlock()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { _ = s.stop() })
	return s
}

// NewCluster starts a dedicated cluster for t, stopped when t ends. Options out of range
// fail the test.
func NewCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.Masters < 0 || opts.Masters > MaxMasters {
		t.Fatalf("celebritytest: ClusterOptions.Masters must be 1..%d (0: %d), got %d", MaxMasters, DefaultMasters, opts.Masters)
	}
	requireLimits(t)
	fleet.mu.Lock()
	c, err := startCluster(opts)
	fleet.mu.Unlock()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		for _, s := range c.nodes() {
			_ = s.stop()
		}
	})
	return c
}

// Prefix returns a new key prefix on every call, unique within the binary, such as
// "t12:TestRetry/cluster:"; it starts with PrefixRoot. Two calls in one test return two
// different prefixes: a test that configures a component with one prefix and checks its
// keys must keep that string, not call Prefix again. It holds no braces, so it never
// changes a key's hash tag.
func Prefix(t testing.TB) string {
	name := strings.NewReplacer("{", "(", "}", ")", " ", "_").Replace(t.Name())
	return PrefixRoot + strconv.FormatInt(fleet.prefixes.Add(1), 10) + ":" + name + ":"
}

// Both runs fn as two subtests: "standalone" on the shared standalone server and "cluster"
// on the shared 3-master cluster, with a client as Server.Client and Cluster.Client give.
func Both(t *testing.T, fn func(t *testing.T, c redis.UniversalClient)) {
	t.Helper()
	t.Run("standalone", func(t *testing.T) { fn(t, Standalone(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { fn(t, SharedCluster(t).Client(t)) })
}

// Main runs the binary's tests from TestMain, stops every server the binary started,
// removes their folders, and fails the run if goroutines leaked:
//
//	func TestMain(m *testing.M) { celebritytest.Main(m) }
func Main(m *testing.M, leakOptions ...goleak.Option) {
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "celebritytest: teardown:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(leakOptions...); err != nil {
			fmt.Fprintln(os.Stderr, "celebritytest: goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func teardown() error {
	fleet.mu.Lock()
	defer fleet.mu.Unlock()
	var first error
	for _, s := range fleet.all {
		if err := s.stop(); err != nil && first == nil {
			first = err
		}
	}
	fleet.all, fleet.shards, fleet.cluster = nil, nil, nil
	if fleet.root != "" {
		if err := os.RemoveAll(fleet.root); err != nil && first == nil {
			first = err
		}
		fleet.root = ""
	}
	return first
}
