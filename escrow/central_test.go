package escrow

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

func newTestCentral(t testing.TB, c Client, capacity int) *Central {
	t.Helper()
	cl, err := NewCentral(c, CentralOptions{Name: "limit", Capacity: capacity, Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true})
	require.NoError(t, err)
	require.NoError(t, cl.Init(testkit.Ctx(t)))
	return cl
}

func TestCentralGrantsEachPermitOnceThenExhausts(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		cl := newTestCentral(t, c, 5)
		seen := map[int]bool{}
		var last int64
		for i := range 5 {
			g, err := cl.Acquire(ctx, fmt.Sprint("job", i))
			require.NoError(t, err)
			require.False(t, seen[g.Permit], "permit %d granted twice", g.Permit)
			seen[g.Permit] = true
			require.Greater(t, g.Token, last, "fencing tokens must grow")
			last = g.Token
		}
		_, err := cl.Acquire(ctx, "job5")
		require.ErrorIs(t, err, ErrExhausted)
		rep := requireClean(t, cl)
		require.Equal(t, 5, rep.Held)

		require.NoError(t, cl.Release(ctx, "job2"))
		g, err := cl.Acquire(ctx, "job5")
		require.NoError(t, err)
		require.Greater(t, g.Token, last, "a re-granted permit gets a larger token")
		require.Equal(t, Stats{Acquired: 6, Exhausted: 1, Released: 1}, cl.Stats())
	})
}

func TestCentralAcquireIsIdempotentPerJob(t *testing.T) {
	ctx := testkit.Ctx(t)
	cl := newTestCentral(t, celebritytest.Standalone(t).Client(t), 3)
	g1, err := cl.Acquire(ctx, "job")
	require.NoError(t, err)
	g2, err := cl.Acquire(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, g1.Permit, g2.Permit)
	require.Equal(t, g1.Token, g2.Token)
	require.True(t, g2.Replayed)
	require.Equal(t, 1, requireClean(t, cl).Held)
}

func TestCentralRetryAfterLostReplyGetsTheSamePermit(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		inj := faults.New()
		var faulty redis.UniversalClient
		if _, ok := c.(*redis.ClusterClient); ok {
			faulty = celebritytest.SharedCluster(t).Client(t, func(o *redis.ClusterOptions) { o.Dialer = inj.Dialer(nil) })
		} else {
			faulty = celebritytest.Standalone(t).Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil) })
		}
		preload(t, faulty)
		cl := newTestCentral(t, faulty, 2)
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: acquireScript.Hash()}, 1)
		g, err := cl.Acquire(ctx, "job") // go-redis retries after the dropped reply
		require.NoError(t, err)
		require.Equal(t, int64(1), inj.Dropped())
		require.True(t, g.Replayed, "the retry must find the first execution's grant")
		rep := requireClean(t, cl)
		require.Equal(t, 1, rep.Held, "a lost reply must not cost a second permit")

		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: releaseScript.Hash()}, 1)
		require.NoError(t, cl.Release(ctx, "job"), "go-redis's retry finds the permit released by the first run, and says so")
		require.Equal(t, int64(2), inj.Dropped())
		rep = requireClean(t, cl)
		require.Equal(t, 0, rep.Held)
		require.Equal(t, 2, rep.Free, "a retried release must not add capacity")
	})
}

func TestCentralRepeatedReleaseNeverAddsCapacity(t *testing.T) {
	ctx := testkit.Ctx(t)
	cl := newTestCentral(t, celebritytest.Standalone(t).Client(t), 2)
	_, err := cl.Acquire(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, cl.Release(ctx, "a"))
	for range 2 {
		require.NoError(t, cl.Release(ctx, "a"), "a replayed release reports the release again")
	}
	require.ErrorIs(t, cl.Release(ctx, "never-granted"), ErrNotHeld)
	rep := requireClean(t, cl)
	require.Equal(t, 2, rep.Free)
	require.Equal(t, uint64(1), cl.Stats().Released)
	require.Equal(t, uint64(3), cl.Stats().NoopReleases)
}

func TestCentralBadInputChangesNothing(t *testing.T) {
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	cl := newTestCentral(t, c, 2)
	_, err := cl.Acquire(ctx, "")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, cl.Release(ctx, ""), ErrInvalid)
	// The script validates on its own too, before any write.
	_, err = runScript(ctx, c, acquireScript, cl.l.keys, "", 0)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = runScript(ctx, c, acquireScript, cl.l.keys, "job", "x")
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, 2, requireClean(t, cl).Free)
}

func TestCentralInitRefusesAnotherCapacity(t *testing.T) {
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	prefix := celebritytest.NewPrefix(t)
	a, err := NewCentral(c, CentralOptions{Name: "l", Capacity: 3, Prefix: prefix, AllowWeakDurability: true})
	require.NoError(t, err)
	require.NoError(t, a.Init(ctx))
	require.NoError(t, a.Init(ctx), "Init is idempotent")
	b, err := NewCentral(c, CentralOptions{Name: "l", Capacity: 4, Prefix: prefix, AllowWeakDurability: true})
	require.NoError(t, err)
	require.ErrorIs(t, b.Init(ctx), ErrLayoutMismatch)
}

// TestLostCentralIsNotRecreatedUntilRestored: after FLUSHALL on the ledger's server, a
// Central whose witness is elsewhere does not come back with every permit free while its old
// holders run; the operator's RestoreLost brings it back, with tokens above the old ones.
func TestLostCentralIsNotRecreatedUntilRestored(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	opts := CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true,
		Witness: celebritytest.Standalone(t).Client(t)}
	cl, err := NewCentral(srv.Client(t), opts)
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx))
	old, err := cl.Acquire(ctx, "old-holder")
	require.NoError(t, err)
	require.NoError(t, srv.AdminClient(t).FlushAll(ctx).Err())

	again, err := NewCentral(srv.Client(t), opts) // a restarted process
	require.NoError(t, err)
	require.ErrorIs(t, again.Init(ctx), ErrLedgerMissing)
	_, err = again.Acquire(ctx, "new")
	require.ErrorIs(t, err, ErrLedgerMissing)

	require.NoError(t, again.RestoreLost(ctx))
	require.ErrorIs(t, again.RestoreLost(ctx), ErrConflict, "only a lost ledger is re-created")
	require.NoError(t, again.Init(ctx))
	g, err := again.Acquire(ctx, "new")
	require.NoError(t, err)
	require.Greater(t, g.Token, old.Token)
	require.Equal(t, uint64(3), again.Stats().Restored)
	require.Equal(t, 2, requireClean(t, again).Free)
}

func TestAcquireWithoutLedgerReportsMissing(t *testing.T) {
	cl, err := NewCentral(celebritytest.Standalone(t).Client(t), CentralOptions{Name: "l", Capacity: 3, Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true})
	require.NoError(t, err)
	_, err = cl.Acquire(testkit.Ctx(t), "job")
	require.True(t, errors.Is(err, ErrLedgerMissing), "got %v", err)
}
