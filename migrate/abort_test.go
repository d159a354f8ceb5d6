package migrate_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// plantClaim makes unit u look claimed for import on shard by migration mig (a claim left
// behind by a migration that no longer runs).
func (e *env) plantClaim(t testing.TB, shard string, u routing.Unit, gen uint64, mig string) {
	t.Helper()
	ctx := testkit.Ctx(t)
	_, err := e.shards[shard].Transition(ctx, u, e.own(shard, u), routing.Ownership{Generation: gen, State: routing.StateImporting})
	require.NoError(t, err)
	require.NoError(t, e.clients[shard].(redis.Cmdable).HSet(ctx, routingfmt.Keys(e.shards[shard].Keys().Tag(u)).Own, "mig", mig).Err())
}

// The target gets claimed by another migration after this one started: the claim and the
// abandon are refused, and the abort must still end (Aborted, lock released, source open)
// instead of stepping in place.
func TestAbortWhenTheTargetIsClaimedByAnotherMigrationTerminates(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(6)
	src := e.openOwner(u)
	dst := other(src)
	co := e.coordinator(migrate.Options{})
	st, err := co.Start(ctx, migrate.Spec{Unit: u, Target: dst})
	require.NoError(t, err)
	e.plantClaim(t, dst, u, st.ImportGen, "ghost")

	// The bound turns a Resume that never ends into a failure; it is generous (a loaded
	// machine), and the journal writes it counts say whether the driver looped.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err = co.Resume(rctx, st.ID)
	require.ErrorIs(t, err, migrate.ErrAborted)
	require.Equal(t, migrate.Aborted, st.State)
	require.Less(t, co.Stats().StateChanges, int64(5), "a few journal writes, not a loop")
	require.Equal(t, routing.StateOpen, e.own(src, u).State)
	require.Equal(t, src, e.table().Owner(u))
	_, err = co.Cancel(ctx, st.ID)
	require.ErrorIs(t, err, migrate.ErrCancelRefused, "Cancel of an aborted migration ends at once")
	require.Equal(t, "ghost", claimOf(t, e, dst, u), "another migration's claim is not touched")
}

func claimOf(t testing.TB, e *env, shard string, u routing.Unit) string {
	t.Helper()
	m, err := e.clients[shard].(redis.Cmdable).HGet(testkit.Ctx(t), routingfmt.Keys(e.shards[shard].Keys().Tag(u)).Own, "mig").Result()
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	return m
}

// Cancel lands between Start and the driver's claim of the target (the driver is held back
// just before its claim script): the driver must not claim the target for a cancelled
// migration afterwards.
func TestCancelBetweenStartAndClaimLeavesNoClaim(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		srv := celebritytest.Shards(t, 2)
		e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": c, "b": srv[1].Client(t)}, routing.ShardOptions{})
		ctx := testkit.Ctx(t)
		u := routing.BucketUnit(7)
		src := e.openOwner(u)
		dst := other(src)
		// The driver's own client for the target holds its claim script back.
		held := &holdHook{arg: "prepare", reached: make(chan struct{}), release: make(chan struct{})}
		var tc redis.UniversalClient
		if dst == "a" {
			tc = c.(*redis.ClusterClient)
		} else {
			tc = srv[1].Client(t)
		}
		tc.AddHook(held)
		clients := map[string]migrate.ShardClient{src: e.clients[src], dst: tc}
		co1, err := migrate.New(e.control, migrate.Options{Shards: clients, Prefix: e.prefix})
		require.NoError(t, err)
		st, err := co1.Start(ctx, migrate.Spec{Unit: u, Target: dst})
		require.NoError(t, err)
		var res error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _, res = co1.Resume(ctx, st.ID) }()
		<-held.reached
		co2 := e.coordinator(migrate.Options{})
		cst, err := co2.Cancel(ctx, st.ID)
		require.NoError(t, err)
		require.Equal(t, migrate.Cancelled, cst.State)
		close(held.release)
		wg.Wait()
		require.ErrorIs(t, res, migrate.ErrCancelled)
		require.NotEqual(t, routing.StateImporting, e.own(dst, u).State, "no claim for a dead migration")
		require.Zero(t, e.dataKeys(dst, u))
		require.Equal(t, routing.StateOpen, e.own(src, u).State)
		// The unit can move again.
		st2, err := co2.Migrate(ctx, migrate.Spec{Unit: u, Target: dst})
		require.NoError(t, err)
		require.Equal(t, migrate.OwnedB, st2.State)
	})
}

// holdHook holds back the first script call carrying arg until release is closed.
type holdHook struct {
	arg      string
	reached  chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	consumed bool
}

func (h *holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.hold(cmd)
		return next(ctx, cmd)
	}
}
func (h *holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdHook) hold(cmd redis.Cmder) {
	h.mu.Lock()
	if h.consumed {
		h.mu.Unlock()
		return
	}
	match := false
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && s == h.arg {
			match = true
		}
	}
	if match {
		h.consumed = true
	}
	h.mu.Unlock()
	if match {
		close(h.reached)
		<-h.release
	}
}

// A claim left behind by a migration that no longer runs is seen with Claims and cleared
// with one call; a claim of an unfinished migration is not.
func TestAStuckClaimIsSeenAndClearedByOneCall(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(8)
	src := e.openOwner(u)
	dst := other(src)
	co := e.coordinator(migrate.Options{})
	e.plantClaim(t, dst, u, e.table().Generation+1, "ghost")
	_, err := co.Start(ctx, migrate.Spec{Unit: u, Target: dst})
	require.ErrorIs(t, err, migrate.ErrOwnershipChanged)
	require.ErrorContains(t, err, "ClearClaim")

	claims, err := co.Claims(ctx, u)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, "ghost", claims[0].Migration)
	require.True(t, claims[0].Stuck())
	cl, err := co.ClearClaim(ctx, u, dst)
	require.NoError(t, err)
	require.Equal(t, "ghost", cl.Migration)
	require.Equal(t, routing.State("cancelled"), e.own(dst, u).State)
	_, err = co.ClearClaim(ctx, u, dst)
	require.ErrorIs(t, err, migrate.ErrInvalid, "nothing left to clear")

	// A running migration's claim is refused.
	st, err := co.Start(ctx, migrate.Spec{Unit: u, Target: dst})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	co2 := e.coordinator(migrate.Options{BatchSize: 1, OnState: func(s migrate.Status) {
		if s.State == migrate.Copying {
			cancel()
		}
	}})
	_, err = co2.Resume(rctx, st.ID)
	require.ErrorIs(t, err, context.Canceled)
	_, err = co.ClearClaim(ctx, u, dst)
	require.ErrorIs(t, err, migrate.ErrBusy)
	st, err = co.Resume(ctx, st.ID)
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
}
