package escrow

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestReleaseWhoseReplyWasLostSaysReleased: a Release runs and its reply is lost; go-redis
// re-sends it. Before the fix the re-sent script found nothing and the caller got ErrNotHeld
// from its first call, as for a job that never held anything. Now the ledger remembers the
// job IDs it released, and a replay of the release (go-redis's, or the caller's own retry)
// reports it released again (nil), while a job that never held a permit there, or whose
// permit was taken back after its lease, still gets ErrNotHeld; a job ID that acquires
// again after its release is a new holder (its later take-back is ErrNotHeld, not a replay).
func TestReleaseWhoseReplyWasLostSaysReleased(t *testing.T) {
	const lease, skew = 100 * time.Millisecond, 50 * time.Millisecond
	for _, kind := range []string{"central", "pool"} {
		t.Run(kind, func(t *testing.T) {
			celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
				ctx := testkit.Ctx(t)
				inj := faults.New()
				c := faultyClient(t, rc, inj, 0)
				lim := leasedKinds[kind](t, c, 2, lease, skew, time.Now)
				occ := newOccupancy(t, lim, 2)
				g, err := lim.acquire(ctx, 0, "job")
				require.NoError(t, err)
				occ.hold("job", g, time.Now)
				occ.check(ctx, "granted")

				occ.drop("job")
				inj.DropReply(faults.Match{Command: "EVALSHA", Arg: releaseScript.Hash()}, 1)
				require.NoError(t, lim.release(ctx, 0, "job"), "the re-sent release reports the permit released")
				require.Equal(t, int64(1), inj.Dropped())
				require.NoError(t, lim.release(ctx, 0, "job"), "so does the caller's own retry")
				rep := requireClean(t, lim)
				require.Equal(t, 2, rep.Free, "once: a replayed release adds nothing")
				occ.check(ctx, "released")
				require.ErrorIs(t, lim.release(ctx, 0, "never"), ErrNotHeld)

				// The same job ID acquires again, dies, and its permit is taken back: its release
				// is not a replay of the earlier one.
				g, err = lim.acquire(ctx, 0, "job")
				require.NoError(t, err)
				require.False(t, g.Replayed)
				occ.hold("job", g, time.Now)
				awaitServerTime(t, c, leaseExpiry(t, c, lim.ledgerOf(0), "job").Add(skew))
				occ.check(ctx, "lapsed")
				sweep := map[string]func() (int, error){
					"central": func() (int, error) { return lim.(centralLimiter).Sweep(ctx) },
					"pool":    func() (int, error) { return lim.(poolLimiter).Sweep(ctx) },
				}[kind]
				n, err := sweep()
				require.NoError(t, err)
				require.Equal(t, 1, n)
				occ.drop("job")
				require.ErrorIs(t, lim.release(ctx, 0, "job"), ErrNotHeld, "taken back, not released")
				occ.check(ctx, "taken back")
			})
		})
	}
}

// TestReleaseRecordsAreBounded: a ledger remembers the last 1024 job IDs it released; an older
// release replays as ErrNotHeld, and the record never grows past the bound.
func TestReleaseRecordsAreBounded(t *testing.T) {
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	cl := newTestCentral(t, c, 1)
	for i := range 1030 {
		job := fmt.Sprintf("j%d", i)
		_, err := cl.Acquire(ctx, job)
		require.NoError(t, err)
		require.NoError(t, cl.Release(ctx, job))
	}
	n, err := c.ZCard(ctx, cl.l.keys[8]).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1024), n)
	require.NoError(t, cl.Release(ctx, "j1029"))
	require.NoError(t, cl.Release(ctx, "j6"))
	require.ErrorIs(t, cl.Release(ctx, "j5"), ErrNotHeld, "forgotten after 1024 newer releases")
}
