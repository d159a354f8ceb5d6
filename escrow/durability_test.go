package escrow

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

func TestInitRefusesAnEvictingPolicyUnlessOverridden(t *testing.T) {
	t.Parallel()
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{Config: []string{"maxmemory-policy", "allkeys-lru"}})
	c := s.Client(t)
	ctx := testCtx(t)
	cl, err := NewCentral(c, CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.Prefix(t)})
	require.NoError(t, err)
	err = cl.Init(ctx)
	require.ErrorIs(t, err, ErrUnsafeEviction)
	require.ErrorContains(t, err, "allkeys-lru")
	_, err = cl.Acquire(ctx, "job")
	require.ErrorIs(t, err, ErrLedgerMissing, "a refused Init creates nothing")

	cl, err = NewCentral(c, CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.Prefix(t), AllowEviction: true})
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx))

	// volatile-* policies never touch keys without a TTL, and ledger keys have none.
	require.NoError(t, c.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err())
	p, err := NewPool(c, PoolOptions{Name: "p", Capacity: 4, Owners: owners(4, "a", "b"), Prefix: celebritytest.Prefix(t)})
	require.NoError(t, err)
	require.NoError(t, p.Init(ctx))
}

func TestInitToleratesForbiddenConfig(t *testing.T) {
	s := celebritytest.Standalone(t)
	ctx := testCtx(t)
	admin := s.Client(t)
	user := "escrow-noconfig-" + celebritytest.Prefix(t)
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", user, "on", ">pw", "~*", "+@all", "-config").Err())
	t.Cleanup(func() { admin.Do(ctx, "ACL", "DELUSER", user) })
	c := s.Client(t, func(o *redis.Options) { o.Username, o.Password = user, "pw" })
	require.Error(t, c.ConfigGet(ctx, "maxmemory-policy").Err(), "the user must be refused CONFIG")
	cl, err := NewCentral(c, CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.Prefix(t)})
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx), "a managed Redis without CONFIG must still work")
	_, err = cl.Acquire(ctx, "job")
	require.NoError(t, err)
}

func TestInitChecksEveryClusterMaster(t *testing.T) {
	c := celebritytest.SharedCluster(t).Client(t)
	ctx := testCtx(t)
	cl, err := NewCentral(c, CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.Prefix(t)})
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx))
	_, err = cl.Acquire(ctx, "job")
	require.NoError(t, err)
}
