package escrow

import (
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// sweepIDs are job and transfer IDs an acceptance suite probes with that escrow accepts:
// pairs a mangling encoder would merge ("a:b" and "a_b", "{x}" and "x", "a\x00b" and "a",
// "\ufffd" and "?") must stay distinct through the Lua scripts and their JSON records.
var sweepIDs = []string{"\ufffd", "?", "a\x00b", "a", "a:b", "a_b", ":", "{", "}", "{x}", "x", `"\u0000"`}

// TestOddIDsRoundTrip: each ID gets its own permit, a retry replays it, Holders lists the IDs
// byte for byte, a transfer under each ID moves exactly once, and every Release frees it.
func TestOddIDsRoundTrip(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		n := len(sweepIDs)
		p := newTestPool(t, c, PoolOptions{Capacity: 4 * n, Owners: owners(4*n, "a\x00b", "a")})
		permits := map[int]bool{}
		for _, id := range sweepIDs {
			g, err := p.Acquire(ctx, "a\x00b", id)
			require.NoError(t, err, "ID %q", id)
			permits[g.Permit] = true
			r, err := p.Acquire(ctx, "a\x00b", id)
			require.NoError(t, err, "ID %q", id)
			require.True(t, r.Replayed, "ID %q", id)
			require.Equal(t, g.Permit, r.Permit, "ID %q", id)
		}
		require.Len(t, permits, n, "one permit per ID")
		hs, err := p.Holders(ctx, "a\x00b")
		require.NoError(t, err)
		var got []string
		for _, h := range hs {
			got = append(got, h.Job)
		}
		require.ElementsMatch(t, sweepIDs, got)
		for _, id := range sweepIDs {
			require.NoError(t, p.Transfer(ctx, "a\x00b", "a", 1, id), "transfer %q", id)
			require.NoError(t, p.Transfer(ctx, "a\x00b", "a", 1, id), "retry of transfer %q", id)
			require.NoError(t, p.Release(ctx, "a\x00b", id), "ID %q", id)
		}
		cl := newTestCentral(t, c, n)
		for _, id := range sweepIDs {
			_, err := cl.Acquire(ctx, id)
			require.NoError(t, err, "central ID %q", id)
		}
		hs, err = cl.Holders(ctx)
		require.NoError(t, err)
		got = got[:0]
		for _, h := range hs {
			got = append(got, h.Job)
		}
		require.ElementsMatch(t, sweepIDs, got, "the central limiter's holders")
		rep := requireClean(t, p)
		require.Equal(t, 4*n, rep.Free)
		frees := []int{rep.Owners[0].Free, rep.Owners[1].Free}
		sort.Ints(frees)
		require.Equal(t, []int{n, 3 * n}, frees, "each transfer ID moved one permit once")
	})
}

// TestRefusedNamesAndIDsNameTheFieldAndWriteNothing: the empty name and the NUL-free
// refusals of TestNamesThatCouldAliasOrBeMangledAreRefused, plus a 1 MiB ID and name; a
// refused Acquire or Transfer writes nothing.
func TestRefusedNamesAndIDsNameTheFieldAndWriteNothing(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	for _, name := range []string{"\xff\xfe", ":", "{", "}", "{tag}", strings.Repeat("n", 1<<20)} {
		_, err := NewPool(c, PoolOptions{Name: name, Capacity: 4, Owners: owners(4, "a")})
		require.ErrorIs(t, err, ErrInvalid, "name %.20q", name)
		require.ErrorContains(t, err, "PoolOptions.Name must", "name %.20q", name)
		_, err = NewCentral(c, CentralOptions{Name: name, Capacity: 4})
		require.ErrorIs(t, err, ErrInvalid, "name %.20q", name)
		require.ErrorContains(t, err, "CentralOptions.Name must", "name %.20q", name)
	}
	ctx := testkit.Ctx(t)
	p := newTestPool(t, c, PoolOptions{Capacity: 4, Owners: owners(4, "a", "b")})
	before, err := p.Audit(ctx)
	require.NoError(t, err)
	huge := strings.Repeat("j", 1<<20)
	_, err = p.Acquire(ctx, "a", huge)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "job ID must be at most")
	err = p.Transfer(ctx, "a", "b", 1, huge)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "transfer ID must be at most")
	// An owner that is not the pool's (whatever its bytes) is refused with the documented
	// ErrUnknownOwner, not ErrInvalid.
	for _, owner := range []string{"", "c", "\xff\xfe", "a:b", "{a}", huge} {
		_, err = p.Acquire(ctx, owner, "j")
		require.ErrorIs(t, err, ErrUnknownOwner, "owner %.20q", owner)
		require.Less(t, len(err.Error()), 200, "the error quotes at most the owner's first bytes")
		_, err = p.Holders(ctx, owner)
		require.ErrorIs(t, err, ErrUnknownOwner, "owner %.20q", owner)
		require.ErrorIs(t, p.Transfer(ctx, "a", owner, 1, "t"), ErrUnknownOwner, "owner %.20q", owner)
	}
	after, err := p.Audit(ctx)
	require.NoError(t, err)
	require.Equal(t, before, after, "bad input changes nothing")
}
