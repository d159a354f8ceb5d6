package replicas_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

func TestMain(m *testing.M) {
	// CELEBRITYTEST_ACL=replicas runs every test as a user holding only the package's rule,
	// with every option that widens it (the tests' fleet rolls are under their prefixes).
	celebritytest.RegisterRule("replicas", func(prefix string) []string {
		return replicas.ACLRule(replicas.Options{Prefix: prefix, WaitReplicas: 1, FleetKey: prefix + "roll"})
	})
	// The runnable examples use the shared cluster (REDIS_CLUSTER_ADDRS); the kit stops it at
	// the end.
	os.Setenv("REDIS_CLUSTER_ADDRS", strings.Join(celebritytest.SharedCluster(celebritytest.ForMain()).Addrs(), ","))
	celebritytest.Main(m)
}

// newReplicator builds a Replicator under the test's own prefix, closed when t ends.
func newReplicator(t testing.TB, c redis.UniversalClient, o replicas.Options) *replicas.Replicator {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = celebritytest.NewPrefix(t)
	}
	r, err := replicas.New(c, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// fleet is a way to open many independent clients to one deployment, one per simulated
// instance.
type fleet struct {
	name   string
	client func(t testing.TB) redis.UniversalClient
	// owner returns the address of the master that owns key ("" on standalone).
	owner func(t testing.TB, key string) string
	// addrs are the deployment's addresses, for a process a test starts.
	addrs []string
}

// bothFleets runs fn on the shared standalone server and on the shared cluster.
func bothFleets(t *testing.T, fn func(t *testing.T, f fleet)) {
	t.Helper()
	t.Run("standalone", func(t *testing.T) {
		s := celebritytest.Standalone(t)
		fn(t, fleet{
			name:   "standalone",
			client: func(t testing.TB) redis.UniversalClient { return s.Client(t) },
			owner:  func(testing.TB, string) string { return "" },
			addrs:  []string{s.Addr()},
		})
	})
	t.Run("cluster", func(t *testing.T) {
		c := celebritytest.SharedCluster(t)
		fn(t, clusterFleet(c))
	})
}

func clusterFleet(c *celebritytest.Cluster) fleet {
	return fleet{
		name:   "cluster",
		client: func(t testing.TB) redis.UniversalClient { return c.Client(t) },
		owner:  func(_ testing.TB, key string) string { return c.MasterOf(key).Addr() },
		addrs:  c.Addrs(),
	}
}

// stored reads the raw record at a physical key and decodes it.
func stored(t testing.TB, c redis.UniversalClient, key string) (version uint64, tombstone bool, data string) {
	t.Helper()
	raw, err := c.Get(context.Background(), key).Result()
	require.NoError(t, err, "physical key %s", key)
	ok, v, tomb, d := replicas.Decode(raw)
	require.True(t, ok, "physical key %s holds %q", key, raw)
	return v, tomb, d
}

// getCalls returns the number of GET commands each server has executed.
func getCalls(t testing.TB, addrs []string) []float64 {
	t.Helper()
	out := make([]float64, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		info, err := c.Info(context.Background(), "commandstats").Result()
		_ = c.Close()
		require.NoError(t, err)
		sc := bufio.NewScanner(strings.NewReader(info))
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "cmdstat_get:calls=")
			if !ok {
				continue
			}
			n, _, _ := strings.Cut(line, ",")
			v, err := strconv.ParseFloat(n, 64)
			require.NoError(t, err)
			out[i] = v
		}
	}
	return out
}

// skew returns max/mean of the per-server deltas between before and after.
func skew(before, after []float64) float64 {
	var sum, most float64
	for i := range after {
		d := after[i] - before[i]
		sum += d
		most = max(most, d)
	}
	if sum == 0 {
		return 0
	}
	return most / (sum / float64(len(after)))
}

// holdBack is a go-redis hook that, while armed, holds back every pipeline (the copy phase
// of a write) until release is closed: a client whose copy writes are delayed in flight.
type holdBack struct {
	armed   atomic.Bool
	once    sync.Once
	held    chan struct{} // closed when the first pipeline is held
	release chan struct{}
}

func newHoldBack() *holdBack {
	return &holdBack{held: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdBack) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *holdBack) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *holdBack) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.armed.Load() && writesCopies(cmds) {
			h.once.Do(func() { close(h.held) })
			<-h.release
		}
		return next(ctx, cmds)
	}
}

// writesCopies reports whether a pipeline writes copies (and is not, for example, the
// handshake of a new connection).
func writesCopies(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		for _, a := range c.Args() {
			if s, ok := a.(string); ok && strings.Contains(s, "}c:") {
				return true
			}
		}
	}
	return false
}

// failPipelines is a go-redis hook that, while armed, fails every pipeline before sending
// it: copy writes that never leave the process.
type failPipelines struct{ armed atomic.Bool }

func (h *failPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *failPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *failPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !h.armed.Load() || !writesCopies(cmds) {
			return next(ctx, cmds)
		}
		err := errors.New("connection refused (injected before sending)")
		for _, c := range cmds {
			c.SetErr(err)
		}
		return err
	}
}

// counter is a go-redis hook counting round trips (a command, or a whole pipeline) and
// commands sent through one client.
type counter struct{ trips, cmds atomic.Int64 }

func (h *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}
func (h *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// hooked returns a new client of f with hook added.
func hooked(t testing.TB, f fleet, hook redis.Hook) redis.UniversalClient {
	t.Helper()
	c := f.client(t)
	c.AddHook(hook)
	return c
}

// hotReads reads key n times through r and returns the values seen (or "miss").
func hotReads(t testing.TB, r *replicas.Replicator, key string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		it, err := r.Get(testkit.Ctx(t), key)
		switch {
		case errors.Is(err, replicas.ErrNotFound):
			seen["miss"]++
		case err != nil:
			require.NoError(t, err)
		default:
			seen[string(it.Value)]++
		}
	}
	return seen
}

// noRenewals is a go-redis hook that fails every renewal of a fill lease (renew.lua) before
// sending it: a holder that keeps loading while cut off from Redis, the zombie whose lease
// ends and may be taken over.
type noRenewals struct{}

func (noRenewals) DialHook(next redis.DialHook) redis.DialHook { return next }
func (noRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && (a[1] == replicas.RenewScript[0] || a[1] == replicas.RenewScript[1]) {
			cmd.SetErr(errors.New("renewal held back (injected before sending)"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (noRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
