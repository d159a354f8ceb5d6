package escrow

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestNamesThatCouldAliasOrBeMangledAreRefused: a name with ':' could share a hash tag with
// another pool's (pool "x:y" owner "z" and pool "x" owner "y:z"), and one that is not valid
// UTF-8 would be replaced in JSON transfer records; both are refused, naming the field, and
// so are huge names and IDs.
func TestNamesThatCouldAliasOrBeMangledAreRefused(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	bad := map[string]string{
		"colon":    "x:y",
		"non-UTF8": "x\xff",
		"brace":    "x{y}",
		"huge":     strings.Repeat("x", MaxNameLen+1),
	}
	for kind, name := range bad {
		_, err := NewPool(c, PoolOptions{Name: name, Capacity: 4, Owners: owners(4, "a")})
		require.ErrorIs(t, err, ErrInvalid, kind)
		require.ErrorContains(t, err, "PoolOptions.Name", kind)
		_, err = NewPool(c, PoolOptions{Name: "p", Capacity: 4, Owners: owners(4, "a", name)})
		require.ErrorIs(t, err, ErrInvalid, kind)
		require.ErrorContains(t, err, "PoolOptions.Owners[1].Name", kind)
		_, err = NewCentral(c, CentralOptions{Name: name, Capacity: 4})
		require.ErrorIs(t, err, ErrInvalid, kind)
		require.ErrorContains(t, err, "CentralOptions.Name", kind)
	}

	ctx := testkit.Ctx(t)
	p := newTestPool(t, c, PoolOptions{Capacity: 4, Owners: owners(4, "a", "b")})
	cl := newTestCentral(t, c, 4)
	before, err := p.Audit(ctx)
	require.NoError(t, err)
	for kind, id := range map[string]string{"empty": "", "non-UTF8": "j\xff", "huge": strings.Repeat("j", MaxIDLen+1)} {
		_, err := p.Acquire(ctx, "a", id)
		require.ErrorIs(t, err, ErrInvalid, kind)
		require.ErrorContains(t, err, "job ID", kind)
		require.ErrorIs(t, p.Release(ctx, "a", id), ErrInvalid, kind)
		_, err = cl.Acquire(ctx, id)
		require.ErrorIs(t, err, ErrInvalid, kind)
		require.ErrorIs(t, p.Transfer(ctx, "a", "b", 1, id), ErrInvalid, kind)
		require.ErrorContains(t, p.Transfer(ctx, "a", "b", 1, id), "transfer ID", kind)
		require.ErrorIs(t, p.Cancel(ctx, "a", id), ErrInvalid, kind)
		require.ErrorIs(t, p.Complete(ctx, "a", id), ErrInvalid, kind)
	}
	after, err := p.Audit(ctx)
	require.NoError(t, err)
	require.Equal(t, before, after, "bad input changes nothing")
	require.Equal(t, 4, requireClean(t, cl).Free)
}

// TestTransferOfMostOfAFullCapacityPool moves 90,000 permits in one transfer (Lua's unpack
// limit is about 8,000 arguments), and a rebalancer accepts such a batch.
func TestTransferOfMostOfAFullCapacityPool(t *testing.T) {
	celebritytest.Long(t)
	func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: MaxCapacity, Owners: []Owner{{"a", 1, 95000}, {"b", 95001, MaxCapacity}}})
		require.NoError(t, p.Transfer(ctx, "a", "b", 90000, "big"))
		rep := requireClean(t, p)
		require.Equal(t, []int{5000, 95000}, []int{rep.Owners[0].Free, rep.Owners[1].Free})
		r, err := NewRebalancer(p, RebalanceOptions{Batch: 9000, High: 20000})
		require.NoError(t, err)
		moved, err := r.Step(ctx)
		require.NoError(t, err)
		require.Equal(t, 0, moved, "neither owner is busy")
		g, err := p.Acquire(ctx, "b", "job")
		require.NoError(t, err)
		require.Equal(t, 1, g.Permit, "b grants the lowest permit, which came from a")
	}(t, celebritytest.Standalone(t).Client(t))
}

// TestStatsCountOnlyStepsThatChangedState repeats every transfer step: the counters move
// once per real change.
func TestStatsCountOnlyStepsThatChangedState(t *testing.T) {
	ctx := testkit.Ctx(t)
	p := newTestPool(t, celebritytest.Standalone(t).Client(t), PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
	for range 3 {
		require.NoError(t, p.Transfer(ctx, "a", "b", 2, "T"))
	}
	for range 2 {
		_, err := p.Freeze(ctx, "a", "b", 1, "U")
		require.NoError(t, err)
	}
	for range 2 {
		require.NoError(t, p.Cancel(ctx, "a", "U"))
	}
	s := p.Stats()
	require.Equal(t, Stats{Frozen: 2, Accepted: 1, Completed: 1, Aborted: 1}, s)
}
