package stripes

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/script"
)

func TestMain(m *testing.M) {
	// CELEBRITYTEST_ACL=stripes runs every test as a user holding only the package's rule.
	celebritytest.RegisterRule("stripes", func(p string) []string { return ACLRule(Options{Prefix: p}) })
	// The runnable examples use the shared standalone server; the kit stops it at the end.
	os.Setenv("REDIS_ADDR", celebritytest.Standalone(celebritytest.ForMain()).Addr())
	celebritytest.Main(m)
}

// newCounter returns a Counter under a prefix unique to t, closed when t ends. Unset
// fields get test defaults: name "views", 4 stripes, a one-minute window, no seal loop.
func newCounter(t testing.TB, c Client, o Options) *Counter {
	t.Helper()
	if o.Name == "" {
		o.Name = "views"
	}
	if o.Prefix == "" {
		o.Prefix = celebritytest.NewPrefix(t)
	}
	if o.Stripes == 0 {
		o.Stripes = 4
	}
	if o.DedupWindow == 0 {
		o.DedupWindow = time.Minute
	}
	if o.SealInterval == 0 {
		o.SealInterval = -1
	}
	cnt, err := New(c, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cnt.Close() })
	return cnt
}

// bothWithFaults runs fn on the shared standalone server and the shared cluster through a
// client whose connections pass through a fault injector; adjust sets client retries.
func bothWithFaults(t *testing.T, maxRetries int, fn func(t *testing.T, c redis.UniversalClient, inj *faults.Injector)) {
	t.Run("standalone", func(t *testing.T) {
		inj := faults.New()
		c := celebritytest.Standalone(t).Client(t, func(o *redis.Options) {
			o.Dialer = inj.Dialer(nil)
			o.MaxRetries = maxRetries
		})
		fn(t, c, inj)
	})
	t.Run("cluster", func(t *testing.T) {
		inj := faults.New()
		c := celebritytest.SharedCluster(t).Client(t, func(o *redis.ClusterOptions) {
			o.Dialer = inj.Dialer(nil)
			o.MaxRetries = maxRetries
			if maxRetries < 0 {
				o.MaxRedirects = -1 // the cluster client's own retry loop
			}
		})
		fn(t, c, inj)
	})
}

// loadScripts loads add.lua on every node behind rc, so that a fault aimed at EVALSHA hits
// an execution rather than a NOSCRIPT reply.
func loadScripts(t testing.TB, rc redis.UniversalClient) {
	t.Helper()
	rc = celebritytest.AdminOf(t, rc) // SCRIPT LOAD is not in the package's rule
	for _, s := range []*script.Script{addScript, addFastScript, splitScript} {
		require.NoError(t, script.Load(context.Background(), rc, s))
	}
}

// nodeFor returns an administrator's client of the node holding key (of rc's server when
// standalone), for a test's own reads and writes of the package's keys (KEYS, PTTL, PERSIST
// are not in the package's rule).
func nodeFor(t testing.TB, rc redis.UniversalClient, key string) redis.Cmdable {
	t.Helper()
	rc = celebritytest.AdminOf(t, rc)
	if cc, ok := rc.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(context.Background(), key)
		require.NoError(t, err)
		return n
	}
	return rc
}

// mustSum returns c.Sum or fails t.
func mustSum(t testing.TB, c *Counter) int64 {
	t.Helper()
	v, err := c.Sum(context.Background())
	require.NoError(t, err)
	return v
}

// stripeValues reads the stored value of every stripe of generation g directly.
func stripeValues(t testing.TB, c *Counter, g uint64) []int64 {
	t.Helper()
	ctx := context.Background()
	l, err := c.loadLayout(ctx)
	require.NoError(t, err)
	gd := l.gen(g)
	require.NotNil(t, gd, "generation %d", g)
	out := make([]int64, gd.Stripes)
	for i := range out {
		v, err := c.client.(redis.Cmdable).HGet(ctx, c.keys.of(gd, i), "v").Int64()
		require.NoError(t, err)
		out[i] = v
	}
	return out
}

// prefixKeys counts the keys under prefix on every node behind c.
func prefixKeys(t testing.TB, c redis.UniversalClient, prefix string) int {
	t.Helper()
	ctx := context.Background()
	c = celebritytest.AdminOf(t, c) // KEYS is not in the package's rule
	count := func(n redis.Cmdable) int {
		keys, err := n.Keys(ctx, prefix+"*").Result()
		require.NoError(t, err)
		return len(keys)
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		var total atomic.Int64
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			keys, err := m.Keys(ctx, prefix+"*").Result()
			total.Add(int64(len(keys)))
			return err
		})
		require.NoError(t, err)
		return int(total.Load())
	}
	return count(c)
}

func id(i int) string { return fmt.Sprintf("event-%07d", i) }

// both runs fn on the shared standalone server and the shared 3-master cluster.
func both(t *testing.T, fn func(t *testing.T, c redis.UniversalClient)) {
	t.Run("standalone", func(t *testing.T) { fn(t, celebritytest.Standalone(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { fn(t, celebritytest.SharedCluster(t).Client(t)) })
}

// onTwoLossyClients runs run on a standalone server and on the shared 3-master cluster, each
// time with two clients of their own (two processes) whose connections go through an
// injector. With retries false, go-redis neither retries nor follows redirects, so that the
// test retries itself after a lost reply.
func onTwoLossyClients(t *testing.T, retries bool, run func(t *testing.T, clients [2]redis.UniversalClient, injs [2]*faults.Injector)) {
	t.Run("standalone", func(t *testing.T) {
		srv := celebritytest.Standalone(t)
		var clients [2]redis.UniversalClient
		var injs [2]*faults.Injector
		for i := range clients {
			injs[i] = faults.New()
			clients[i] = srv.Client(t, func(o *redis.Options) {
				o.Dialer = injs[i].Dialer(nil)
				if !retries {
					o.MaxRetries = -1
				}
			})
		}
		run(t, clients, injs)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := celebritytest.SharedCluster(t)
		var clients [2]redis.UniversalClient
		var injs [2]*faults.Injector
		for i := range clients {
			injs[i] = faults.New()
			clients[i] = cl.Client(t, func(o *redis.ClusterOptions) {
				o.Dialer = injs[i].Dialer(nil)
				if !retries {
					o.MaxRetries, o.MaxRedirects = -1, -1
				}
			})
		}
		run(t, clients, injs)
	})
}
