package stripes

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestResizeIsIdempotentUnderConcurrency(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		prefix := celebritytest.Prefix(t)
		ctx := context.Background()
		var wg sync.WaitGroup
		gens := make([]uint64, 8)
		for k := range gens {
			c := newCounter(t, rc, Options{Prefix: prefix, Stripes: 4})
			wg.Go(func() {
				g, err := c.Resize(ctx, 8)
				if err != nil {
					t.Error(err)
				}
				gens[k] = g
			})
		}
		wg.Wait()
		for _, g := range gens {
			require.Equal(t, uint64(2), g, "every resizer reports the one new generation")
		}
		c := newCounter(t, rc, Options{Prefix: prefix, Stripes: 4})
		g, err := c.Resize(ctx, 8)
		require.NoError(t, err)
		require.Equal(t, uint64(2), g, "resizing to the current count changes nothing")
		l := mustLayout(t, c)
		require.Len(t, l.doc.Gens, 2)
		require.Len(t, l.doc.Gens[0].Ends, 4)
		require.False(t, l.doc.Gens[1].Pending)
	})
}

// announce performs only step 1 of Resize: the layout names a pending generation of n
// stripes, as after a resizer that crashed right after its compare-and-set.
func announce(t testing.TB, c *Counter, n int) {
	t.Helper()
	ctx := context.Background()
	l := mustLayout(t, c)
	last := l.doc.Gens[len(l.doc.Gens)-1]
	g := genDoc{Gen: last.Gen + 1, Stripes: n, Start: time.Now().UnixMilli(), Pending: true}
	var err error
	g.Tags, err = c.place(ctx, g.Gen, n)
	require.NoError(t, err)
	doc := l.doc
	doc.Gens = append(slices.Clone(l.doc.Gens), g)
	ok, err := c.casLayout(ctx, l.ver, doc)
	require.NoError(t, err)
	require.True(t, ok)
}

func TestResizeCrashedAfterAnnouncingIsFinished(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{Stripes: 2})
		ctx := context.Background()
		_, err := c.Add(ctx, Event{ID: "before", Time: time.Now()}, 1)
		require.NoError(t, err)
		announce(t, c, 6)

		// While the new generation is pending, events still go to the open one.
		res, err := c.Add(ctx, Event{ID: "during", Time: time.Now()}, 1)
		require.NoError(t, err)
		require.Equal(t, uint64(1), res.Gen)
		require.Equal(t, int64(2), mustSum(t, c), "a pending generation adds nothing to Sum")

		// Any later Resize (or Seal) finishes it.
		g, err := c.Resize(ctx, 6)
		require.NoError(t, err)
		require.Equal(t, uint64(2), g)
		res, err = c.Add(ctx, Event{ID: "after", Time: time.Now().Add(time.Second)}, 1)
		require.NoError(t, err)
		require.Equal(t, uint64(2), res.Gen)
		res, err = c.Add(ctx, Event{ID: "late-arrival"}.at(time.Now().Add(-time.Second)), 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.Equal(t, uint64(1), res.Gen, "an event before the boundary goes to generation 1")
		require.Equal(t, int64(4), mustSum(t, c))
	})
}

func TestResizeCrashedAfterClosingRedirectsByStripe(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{Stripes: 2})
		ctx := context.Background()
		require.Zero(t, mustSum(t, c))
		announce(t, c, 3)
		l := mustLayout(t, c)
		next := l.doc.Gens[1]
		require.NoError(t, c.createStripes(ctx, &next))
		_, err := c.pipeline(ctx, closeScript, 2, func(i int) (string, []any) {
			return c.keys.of(&l.doc.Gens[0], i), []any{1, next.Start}
		})
		require.NoError(t, err)
		// The layout still says generation 2 is pending; the closed stripes send new
		// events on to it.
		res, err := c.Add(ctx, Event{ID: "new", Time: time.UnixMilli(next.Start + 10)}, 1)
		require.NoError(t, err)
		require.Equal(t, uint64(2), res.Gen)
		require.Equal(t, int64(1), mustSum(t, c), "Sum reads pending stripes that exist")

		_, err = c.Seal(ctx) // finishes the resize
		require.NoError(t, err)
		l = mustLayout(t, c)
		require.False(t, l.doc.Gens[1].Pending)
		res, err = c.Add(ctx, Event{ID: "new", Time: time.UnixMilli(next.Start + 10)}, 1)
		require.NoError(t, err)
		require.False(t, res.Applied)
		require.Equal(t, uint64(2), res.Gen)
		require.Equal(t, int64(1), mustSum(t, c))
	})
}

func TestEventPastProposedBoundaryKeepsItsGeneration(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{Stripes: 1})
		ctx := context.Background()
		// A client whose clock runs 5s ahead counts an event in generation 1 ...
		ahead := Event{ID: "ahead", Time: time.Now().Add(5 * time.Second)}
		res, err := c.Add(ctx, ahead, 1)
		require.NoError(t, err)
		require.Equal(t, uint64(1), res.Gen)
		// ... then a resize proposes a boundary of "now".
		_, err = c.Resize(ctx, 4)
		require.NoError(t, err)
		end := mustLayout(t, c).gen(1).Ends[0]
		require.Equal(t, ahead.Time.UnixMilli()+1, end, "the stripe's boundary moved past its latest event")
		res, err = c.Add(ctx, ahead, 1)
		require.NoError(t, err)
		require.False(t, res.Applied, "the retry finds the event in generation 1")
		require.Equal(t, uint64(1), res.Gen)
		require.Equal(t, int64(1), mustSum(t, c))
	})
}

func TestStaleLayoutIsRedirectedToTheNewGeneration(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		prefix := celebritytest.Prefix(t)
		a := newCounter(t, rc, Options{Prefix: prefix, Stripes: 2})
		b := newCounter(t, rc, Options{Prefix: prefix, Stripes: 2})
		ctx := context.Background()
		_, err := a.Add(ctx, Event{ID: "warm", Time: time.Now()}, 1) // a caches generation 1 only
		require.NoError(t, err)
		_, err = b.Resize(ctx, 5)
		require.NoError(t, err)

		ev := Event{ID: "fresh", Time: time.Now().Add(10 * time.Millisecond)}
		res, err := a.Add(ctx, ev, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.Equal(t, uint64(2), res.Gen, "the closed stripe redirected the stale client")
		res, err = b.Add(ctx, ev, 1)
		require.NoError(t, err)
		require.False(t, res.Applied, "another client's retry is a duplicate")
		require.Equal(t, int64(2), mustSum(t, b))

		st, err := b.Stamp(ctx, "stamped")
		require.NoError(t, err)
		require.Equal(t, uint64(2), st.Gen)
	})
}
