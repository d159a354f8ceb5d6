package escrow

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// placedPool picks a pool name whose owner a has its ledger on one master, its witness on
// another, and owner b's ledger on a third master than a's. It returns the options and the
// index of a's master, which is not avoid.
func placedPool(t *testing.T, cl *celebritytest.Cluster, c *redis.ClusterClient, avoid int) (PoolOptions, int) {
	t.Helper()
	index := func(key string) int {
		for i, m := range cl.Masters() {
			if m == cl.MasterOf(key) {
				return i
			}
		}
		t.Fatalf("no master for %q", key)
		return -1
	}
	for n := 0; n < 1000; n++ {
		opts := PoolOptions{Name: fmt.Sprint("p", n), Prefix: celebritytest.NewPrefix(t), Capacity: 10, Owners: owners(10, "a", "b"), AllowWeakDurability: true}
		p, err := NewPool(c, opts)
		require.NoError(t, err)
		ia, wa, ib := index(p.ledgers["a"].keys[0]), index(p.WitnessKey("a")), index(p.ledgers["b"].keys[0])
		if ia != wa && ia != ib && ia != avoid {
			return opts, ia
		}
	}
	t.Fatal("no placement found")
	return PoolOptions{}, 0
}

// syncReplica waits until master i's replica has every write so far.
func syncReplica(t *testing.T, cl *celebritytest.Cluster, i int) {
	t.Helper()
	n, err := cl.Masters()[i].AdminClient(t).Wait(testkit.Ctx(t), 1, 5*time.Second).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}

// TestFailoverAfterAcknowledgedFreeze covers the two failovers of the owner's master right
// after an acknowledged freeze. A coordinated failover (the replica catches up first) loses
// nothing and the transfer finishes. A forced failover while the replica lags loses the
// acknowledged writes; the ledger is then behind its witness, refuses with ErrFenced, and
// Reconcile restores a placement in which no permit exists twice.
//
// Both cases share one cluster (starting one takes seconds): each uses its own master.
func TestFailoverAfterAcknowledgedFreeze(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel()
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Replicas: true})
	t.Run("Init checks every master", func(t *testing.T) {
		// On this dedicated cluster (the shared one serves parallel tests): one master with an
		// evicting policy makes Init refuse, naming that master.
		ctx := testkit.Ctx(t)
		m := cl.Masters()[len(cl.Masters())-1]
		require.NoError(t, m.AdminClient(t).ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
		defer func() { require.NoError(t, m.AdminClient(t).ConfigSet(ctx, "maxmemory-policy", "noeviction").Err()) }()
		cn, err := NewCentral(cl.Client(t), CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true})
		require.NoError(t, err)
		err = cn.Init(ctx)
		require.ErrorIs(t, err, ErrUnsafeEviction)
		require.ErrorContains(t, err, m.Addr())
	})
	first := -1
	t.Run("coordinated", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		c := cl.Client(t)
		opts, i := placedPool(t, cl, c, -1)
		first = i
		p := newTestPool(t, c, opts)
		f, err := p.Freeze(ctx, "a", "b", 3, "T")
		require.NoError(t, err)
		cl.Failover(t, i)

		p2 := newTestPool(t, cl.Client(t), opts)
		rep, err := p2.Recover(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"T"}, rep.Completed, "the freeze survived the coordinated failover")
		audit := requireClean(t, p2)
		require.Equal(t, 2, audit.Owners[0].Free)
		require.Equal(t, 8, audit.Owners[1].Free)
		require.Len(t, f.Permits, 3)
	})

	t.Run("forced while the replica lags", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		c := cl.Client(t)
		opts, i := placedPool(t, cl, c, first)
		p := newTestPool(t, c, opts)
		held, err := p.Acquire(ctx, "a", "held-before")
		require.NoError(t, err)
		syncReplica(t, cl, i)

		// Cut the replica off: it is stopped and its replication link closed, so the master
		// acknowledges writes that exist nowhere else.
		master, replica := cl.Masters()[i], cl.Replicas()[i]
		replica.Pause()
		require.NoError(t, master.AdminClient(t).Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())

		// Acknowledged on a's master only: T1 frozen (never delivered), T2 frozen and
		// accepted by b, and one more grant.
		_, err = p.Freeze(ctx, "a", "b", 1, "T1")
		require.NoError(t, err)
		f2, err := p.Freeze(ctx, "a", "b", 2, "T2")
		require.NoError(t, err)
		require.NoError(t, p.Deliver(ctx, f2))
		lost, err := p.Acquire(ctx, "a", "granted-then-lost")
		require.NoError(t, err)

		master.Kill()
		replica.Resume()
		cl.ForceFailover(t, i)

		p2, err := NewPool(cl.Client(t), opts)
		require.NoError(t, err)
		require.ErrorIs(t, p2.Init(ctx), ErrFenced, "Init finds a's ledger behind its witness")
		_, err = p2.Acquire(ctx, "a", "new")
		require.ErrorIs(t, err, ErrFenced, "a's ledger lost acknowledged writes and must refuse")
		_, err = p2.Freeze(ctx, "a", "b", 1, "T3")
		require.ErrorIs(t, err, ErrFenced)
		rep, err := p2.Recover(ctx)
		require.NoError(t, err)
		require.Empty(t, rep.Completed, "a has no record of T1 or T2 any more")
		audit, err := p2.Audit(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, audit.Duplicated, "before reconcile, T2's permits show at a and b: %s", audit)

		require.NoError(t, p2.Reconcile(ctx, "a"))
		audit = requireClean(t, p2)
		require.Equal(t, 1, audit.Held, "only the grant replicated before the cut survives")
		// a: permit 1 held, T1's permit 2 and permit 5 free; T2's permits 3 and 4 at b only.
		require.Equal(t, 2, audit.Owners[0].Free, "T1's permit is back at a; T2's 2 permits are at b only")
		require.Equal(t, 7, audit.Owners[1].Free)

		// Exhaust the pool: every permit is granted exactly once, and the permit of the lost
		// grant comes back with a larger token.
		seen := map[int]bool{held.Permit: true}
		for _, owner := range []string{"a", "b"} {
			for j := 0; ; j++ {
				g, err := p2.Acquire(ctx, owner, fmt.Sprint("fill", j))
				if err != nil {
					require.ErrorIs(t, err, ErrExhausted)
					break
				}
				require.False(t, seen[g.Permit], "permit %d granted twice", g.Permit)
				seen[g.Permit] = true
				if g.Permit == lost.Permit {
					require.Greater(t, g.Token, lost.Token)
				}
			}
		}
		require.Len(t, seen, 10)
		requireClean(t, p2)
	})
}
