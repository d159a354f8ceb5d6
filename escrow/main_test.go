package escrow

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/script"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

func TestMain(m *testing.M) {
	// CELEBRITYTEST_ACL=escrow runs every test as a user holding only the package's rule.
	celebritytest.RegisterRule("escrow", func(p string) []string { return ACLRule(PoolOptions{Prefix: p}) })
	// The runnable examples use two servers with appendfsync always, one for the ledgers
	// (REDIS_ADDR) and one for the witnesses (REDIS_WITNESS_ADDR), as production would; the kit
	// stops them at the end.
	os.Setenv("REDIS_ADDR", celebritytest.NewServer(celebritytest.ForMain(), celebritytest.ServerOptions{AOF: true}).Addr())
	os.Setenv("REDIS_WITNESS_ADDR", celebritytest.NewServer(celebritytest.ForMain(), celebritytest.ServerOptions{AOF: true}).Addr())
	celebritytest.Main(m)
}

// owners splits 1..capacity evenly among the named owners.
func owners(capacity int, names ...string) []Owner {
	out := make([]Owner, len(names))
	per := capacity / len(names)
	for i, n := range names {
		out[i] = Owner{Name: n, First: i*per + 1, Last: (i + 1) * per}
	}
	out[len(out)-1].Last = capacity
	return out
}

// newTestPool builds and initialises a pool under a prefix unique to t.
func newTestPool(t testing.TB, c Client, opts PoolOptions) *Pool {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = celebritytest.NewPrefix(t)
	}
	if opts.Name == "" {
		opts.Name = "pool"
	}
	// Most test servers run without AOF, and the shared standalone server holds ledgers and
	// witnesses together; the tests of strict Init set these options themselves.
	opts.AllowWeakDurability = true
	if _, standalone := c.(*redis.Client); standalone && opts.Witness == nil {
		opts.AllowSharedWitness = true
	}
	p, err := NewPool(c, opts)
	require.NoError(t, err)
	require.NoError(t, p.Init(testkit.Ctx(t)))
	return p
}

// requireClean audits the pool and fails the test on any misplaced permit.
func requireClean(t testing.TB, a interface {
	Audit(context.Context) (AuditReport, error)
}) AuditReport {
	t.Helper()
	rep, err := a.Audit(testkit.Ctx(t))
	require.NoError(t, err)
	require.Truef(t, rep.Clean(), "audit: %s", rep)
	require.LessOrEqual(t, rep.Held, rep.Capacity)
	return rep
}

// freeAt returns the number of free permits of owner from an audit.
func freeAt(t testing.TB, p *Pool, owner string) int {
	t.Helper()
	rep, err := p.Audit(testkit.Ctx(t))
	require.NoError(t, err)
	for _, o := range rep.Owners {
		if o.Owner == owner {
			return o.Free
		}
	}
	t.Fatalf("owner %q not in audit", owner)
	return 0
}

// preload loads every script on every master as the administrator, so that an EVALSHA never meets NOSCRIPT (a
// dropped NOSCRIPT reply would look like a lost reply of a command that never ran).
func preload(t testing.TB, c redis.UniversalClient) {
	t.Helper()
	ctx := testkit.Ctx(t)
	c = celebritytest.AdminOf(t, c) // SCRIPT LOAD is not in the package's rule
	if cc, ok := c.(*redis.ClusterClient); ok {
		// Every node, replicas too: a test that fails over must not meet NOSCRIPT after it.
		require.NoError(t, cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
			return script.Load(ctx, n, allScripts...)
		}))
		return
	}
	require.NoError(t, script.Load(ctx, c, allScripts...))
}
