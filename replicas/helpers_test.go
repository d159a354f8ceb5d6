package replicas_test

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/replicas"
)

func TestMain(m *testing.M) { celebritytest.Main(m) }

// newReplicator builds a Replicator under the test's own prefix, closed when t ends.
func newReplicator(t testing.TB, c redis.UniversalClient, o replicas.Options) *replicas.Replicator {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = celebritytest.Prefix(t)
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
	}
}

// ctxFor returns a context bounded generously, cancelled when t ends.
func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
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
