package stripes

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sumOf adds up vs.
func sumOf(vs []int64) (s int64) {
	for _, v := range vs {
		s += v
	}
	return s
}

// pastBoundary waits until the clock is past every stripe boundary of generation g, so
// that an event stamped time.Now() goes to a newer generation. A boundary can be a
// millisecond after Resize returned: it is later than every event its stripe accepted.
func pastBoundary(t *testing.T, c *Counter, g uint64) {
	t.Helper()
	gd := mustLayout(t, c).gen(g)
	require.NotNil(t, gd)
	require.NotEmpty(t, gd.Ends, "generation %d is closed", g)
	end := time.UnixMilli(slices.Max(gd.Ends))
	time.Sleep(time.Until(end) + time.Millisecond)
}

// withLayout creates c's layout before a test stamps its first event: with a window of a
// second or two, creating it inside the first Add takes too large a share of the window on
// a loaded machine (up to a third of a second seen, against 2 ms for the next Add).
func withLayout(t *testing.T, c *Counter) {
	t.Helper()
	_, err := c.ensureLayout(context.Background())
	require.NoError(t, err)
}

// sealEventually calls Seal until it folds generation g.
func sealEventually(t *testing.T, c *Counter, g uint64) {
	t.Helper()
	// The condition runs on its own goroutine: it reports to ct, never to t.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got, err := c.Seal(context.Background())
		require.NoError(ct, err)
		require.Equal(ct, []uint64{g}, got)
	}, 30*time.Second, 50*time.Millisecond, "generation %d is sealed once its window passed", g)
}

func TestSealedGenerationFoldsOnceAndRejectsRetries(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		const window = time.Second
		c := newCounter(t, rc, Options{Stripes: 4, DedupWindow: window})
		ctx := context.Background()
		withLayout(t, c)

		// Generation 1: 60 events by time, 40 stamped with their generation.
		var old []Event
		for i := range 100 {
			ev := Event{ID: fmt.Sprintf("g1-%d", i), Time: time.Now()}
			if i >= 60 {
				var err error
				ev, err = c.Stamp(ctx, ev.ID)
				require.NoError(t, err)
				require.Equal(t, uint64(1), ev.Gen)
			}
			res, err := c.Add(ctx, ev, 1)
			require.NoError(t, err)
			require.True(t, res.Applied)
			old = append(old, ev)
		}
		// A reader that caches the layout now, before the seal.
		stale := newCounter(t, rc, Options{Prefix: c.opts.Prefix, DedupWindow: window})
		_, err := stale.Add(ctx, old[0], 1)
		require.NoError(t, err)

		g2, err := c.Resize(ctx, 8)
		require.NoError(t, err)
		require.Equal(t, uint64(2), g2)
		pastBoundary(t, c, 1)
		for i := range 50 {
			_, err := c.Add(ctx, Event{ID: fmt.Sprintf("g2-%d", i), Time: time.Now()}, 1)
			require.NoError(t, err)
		}
		_, err = c.Seal(ctx)
		require.NoError(t, err)
		require.False(t, mustLayout(t, c).isFolded(1), "not sealed before its window passed")
		s1 := sumOf(stripeValues(t, c, 1))
		require.Equal(t, int64(100), s1)

		sealEventually(t, c, 1)
		l := mustLayout(t, c)
		require.Equal(t, s1, l.folded[1], "the sealed total is the stripe sum at sealing")
		require.Equal(t, s1, l.base)
		require.Equal(t, int64(150), mustSum(t, c))

		for _, ev := range []Event{old[0], old[99]} {
			_, err := c.Add(ctx, ev, 1)
			require.ErrorIs(t, err, ErrTooOld, "retry of %s after the seal", ev.ID)
		}
		// The stale counter still thinks generation 1 is live: the stripe refuses.
		_, err = stale.Add(ctx, old[1], 1)
		require.ErrorIs(t, err, ErrTooOld)
		require.Equal(t, int64(150), mustSum(t, c), "late retries changed nothing")
		require.Equal(t, s1, sumOf(stripeValues(t, c, 1)), "sealed stripes are frozen")

		again, err := c.Seal(ctx)
		require.NoError(t, err)
		require.Empty(t, again)
		require.Equal(t, s1, mustLayout(t, c).base, "a second seal folds nothing")

		// Sealed stripes expire; a counter with a stale layout that finds one missing
		// rereads the layout and reports ErrTooOld.
		gd := mustLayout(t, c).gen(1)
		for i := range gd.Stripes {
			key := c.keys.of(gd, i)
			ttl, err := nodeFor(t, rc, key).PTTL(ctx, key).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, time.Duration(0), "sealed stripe %d expires", i)
			require.NoError(t, nodeFor(t, rc, key).Del(ctx, key).Err())
		}
		stale.layout.Store(l.withoutFold(1))
		_, err = stale.Add(ctx, old[2], 1)
		require.ErrorIs(t, err, ErrTooOld)
		require.Equal(t, int64(150), mustSum(t, c))
	})
}

func TestSealCrashBeforeFoldFoldsOnce(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		const window = time.Second
		c := newCounter(t, rc, Options{Stripes: 3, DedupWindow: window})
		ctx := context.Background()
		withLayout(t, c)
		for i := range 30 {
			_, err := c.Add(ctx, Event{ID: fmt.Sprintf("e%d", i), Time: time.Now()}, 2)
			require.NoError(t, err)
		}
		_, err := c.Resize(ctx, 5)
		require.NoError(t, err)
		gd := *mustLayout(t, c).gen(1)
		pastBoundary(t, c, 1)

		// A seal round that marked the stripes sealed and crashed before folding.
		cmds, err := c.pipeline(ctx, sealScript, gd.Stripes, func(i int) (string, []any) {
			return c.keys.of(&gd, i), []any{gd.Gen}
		})
		require.NoError(t, err)
		for _, cmd := range cmds {
			require.NoError(t, cmd.Err())
		}
		_, err = c.Add(ctx, Event{ID: "e0", Time: time.Now()}, 2)
		require.NoError(t, err, "an event after the boundary goes to generation 2")
		_, err = c.Add(ctx, Event{ID: "late", Time: time.Unix(0, 0).Add(time.Duration(gd.Ends[0]-1) * time.Millisecond), Gen: 1}, 2)
		require.ErrorIs(t, err, ErrTooOld, "a sealed stripe takes nothing")

		// Two seal rounds racing after the crash fold the total once.
		sealEventually(t, c, 1)
		reply, err := foldScript.Run(ctx, rc, []string{c.keys.layout()}, 1, 60).Slice()
		require.NoError(t, err)
		require.Equal(t, []any{int64(0), "60"}, reply, "the repeated fold is a no-op")
		l := mustLayout(t, c)
		require.Equal(t, int64(60), l.base)
		require.Equal(t, int64(62), mustSum(t, c))
	})
}

func TestSealCrashAfterFoldStillExpiresStripes(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{Stripes: 3, DedupWindow: time.Second})
		ctx := context.Background()
		withLayout(t, c)
		_, err := c.Add(ctx, Event{ID: "a", Time: time.Now()}, 1)
		require.NoError(t, err)
		_, err = c.Resize(ctx, 2)
		require.NoError(t, err)
		sealEventually(t, c, 1)

		// Undo step 3, as a round that stopped right after the fold would have left it.
		gd := *mustLayout(t, c).gen(1)
		keys := make([]string, gd.Stripes)
		for i := range keys {
			keys[i] = c.keys.of(&gd, i)
			require.NoError(t, nodeFor(t, rc, keys[i]).Persist(ctx, keys[i]).Err())
		}
		require.NoError(t, rc.HDel(ctx, c.keys.layout(), "expiring:1").Err())

		folded, err := c.Seal(ctx)
		require.NoError(t, err)
		require.Empty(t, folded, "nothing is folded twice")
		for _, k := range keys {
			ttl, err := nodeFor(t, rc, k).PTTL(ctx, k).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, time.Duration(0), "sealed stripe %s expires again", k)
		}
		require.NotZero(t, mustLayout(t, c).expiring[1])
		require.Equal(t, int64(1), mustSum(t, c))
	})
}

func TestSealLoopSealsInTheBackground(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		// The window must outlast one Add on a loaded machine: the event is stamped before
		// the call and checked against the server's clock when the script runs.
		c := newCounter(t, rc, Options{Stripes: 2, DedupWindow: 2 * time.Second, SealInterval: 50 * time.Millisecond})
		ctx := context.Background()
		withLayout(t, c)
		_, err := c.Add(ctx, Event{ID: "x", Time: time.Now()}, 1)
		require.NoError(t, err)
		_, err = c.Resize(ctx, 3)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			l, err := c.loadLayout(ctx)
			return err == nil && l != nil && l.isFolded(1)
		}, 20*time.Second, 20*time.Millisecond)
		require.Equal(t, int64(1), mustSum(t, c))
		require.NoError(t, c.Close())
	})
}

// mustLayout reads c's layout record.
func mustLayout(t testing.TB, c *Counter) *layout {
	t.Helper()
	l, err := c.loadLayout(context.Background())
	require.NoError(t, err)
	require.NotNil(t, l)
	return l
}
