package escrow

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

func TestInitRefusesAnEvictingPolicyUnlessOverridden(t *testing.T) {
	t.Parallel()
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{Config: []string{"maxmemory-policy", "allkeys-lru"}})
	c := s.Client(t)
	ctx := testkit.Ctx(t)
	cl, err := NewCentral(c, CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true})
	require.NoError(t, err)
	err = cl.Init(ctx)
	require.ErrorIs(t, err, ErrUnsafeEviction)
	require.ErrorContains(t, err, "allkeys-lru")
	_, err = cl.Acquire(ctx, "job")
	require.ErrorIs(t, err, ErrLedgerMissing, "a refused Init creates nothing")

	cl, err = NewCentral(c, CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.NewPrefix(t), AllowEviction: true, AllowWeakDurability: true})
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx))

	// volatile-* policies never touch keys without a TTL, and ledger keys have none.
	require.NoError(t, s.AdminClient(t).ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err())
	p, err := NewPool(c, PoolOptions{Name: "p", Capacity: 4, Owners: owners(4, "a", "b"), Prefix: celebritytest.NewPrefix(t),
		AllowWeakDurability: true, AllowSharedWitness: true})
	require.NoError(t, err)
	require.NoError(t, p.Init(ctx))
}

// TestInitRefusesForbiddenConfigUnlessOverridden: a managed Redis without CONFIG cannot show
// its durability settings; strict Init says so, and works once the host vouches for them.
func TestInitRefusesForbiddenConfigUnlessOverridden(t *testing.T) {
	s := celebritytest.Standalone(t)
	ctx := testkit.Ctx(t)
	admin := s.AdminClient(t)
	user := "escrow-noconfig-" + celebritytest.NewPrefix(t)
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", user, "on", ">pw", "~*", "+@all", "-config").Err())
	t.Cleanup(func() { admin.Do(ctx, "ACL", "DELUSER", user) })
	c := s.Client(t, func(o *redis.Options) { o.Username, o.Password = user, "pw" })
	require.Error(t, c.ConfigGet(ctx, "maxmemory-policy").Err(), "the user must be refused CONFIG")
	cl, err := NewCentral(c, CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.NewPrefix(t)})
	require.NoError(t, err)
	err = cl.Init(ctx)
	require.ErrorIs(t, err, ErrWeakDurability)
	require.ErrorContains(t, err, "CONFIG GET refused")
	cl, err = NewCentral(c, CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true})
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx), "a managed Redis without CONFIG works once the host vouches for it")
	_, err = cl.Acquire(ctx, "job")
	require.NoError(t, err)
}

func TestInitChecksEveryClusterMaster(t *testing.T) {
	c := celebritytest.SharedCluster(t).Client(t)
	ctx := testkit.Ctx(t)
	cl, err := NewCentral(c, CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true})
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx))
	_, err = cl.Acquire(ctx, "job")
	require.NoError(t, err)
}

// TestStrictInitRefusesAServerWithoutAOFAlways: a server that may lose acknowledged writes
// is refused at Init even without a Logger, unless the host opts out.
func TestStrictInitRefusesAServerWithoutAOFAlways(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	weak := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	cl, err := NewCentral(weak.Client(t), CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.NewPrefix(t)})
	require.NoError(t, err)
	err = cl.Init(ctx)
	require.ErrorIs(t, err, ErrWeakDurability)
	require.ErrorContains(t, err, weak.Addr())
	_, err = cl.Acquire(ctx, "job")
	require.ErrorIs(t, err, ErrLedgerMissing, "a refused Init creates nothing")

	durable := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	cl, err = NewCentral(durable.Client(t), CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.NewPrefix(t)})
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx), "AOF with appendfsync always passes strict Init")
}

// TestStrictInitPlacesWitnessesAwayFromTheirLedgers: on a standalone server without a
// separate Witness, every witness shares its ledger's fate, and strict Init refuses; with a
// Witness on another server it passes. On a 3-master cluster every witness of many owners is
// on another master than its ledger, and strict Init passes.
func TestStrictInitPlacesWitnessesAwayFromTheirLedgers(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	durable := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	opts := PoolOptions{Name: "p", Capacity: 4, Owners: owners(4, "a", "b"), Prefix: celebritytest.NewPrefix(t)}
	p, err := NewPool(durable.Client(t), opts)
	require.NoError(t, err)
	err = p.Init(ctx)
	require.ErrorIs(t, err, ErrSharedWitness)
	_, err = p.Acquire(ctx, "a", "job")
	require.ErrorIs(t, err, ErrLedgerMissing, "a refused Init creates nothing")

	opts.Witness = celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true}).Client(t)
	p, err = NewPool(durable.Client(t), opts)
	require.NoError(t, err)
	require.NoError(t, p.Init(ctx))

	cl := celebritytest.SharedCluster(t)
	c := cl.Client(t)
	names := make([]string, 60)
	for i := range names {
		names[i] = fmt.Sprint("owner", i)
	}
	copts := PoolOptions{Name: "p", Capacity: 60, Owners: owners(60, names...), Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true}
	cp, err := NewPool(c, copts)
	require.NoError(t, err)
	for _, o := range names {
		require.NotSame(t, cl.MasterOf(cp.ledgers[o].keys[0]), cl.MasterOf(cp.WitnessKey(o)), o)
	}
	require.NoError(t, cp.Init(ctx), "strict placement passes on the cluster")
}
