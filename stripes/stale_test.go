package stripes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestOldLayoutAfterSealCountsFreshEvents: a writer that cached the layout before another
// process resized and sealed still counts every fresh event, through Add, AddBatch and
// after Close: the sealed stripe redirects the event to the generation that owns its time.
func TestOldLayoutAfterSealCountsFreshEvents(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		const window = time.Second
		prefix := celebritytest.NewPrefix(t)
		writer := newCounter(t, rc, Options{Prefix: prefix, Stripes: 4, DedupWindow: window})
		admin := newCounter(t, rc, Options{Prefix: prefix, Stripes: 4, DedupWindow: window})
		ctx := context.Background()
		withLayout(t, admin)
		_, err := writer.Add(ctx, Event{ID: "first", Time: time.Now()}, 1) // caches generation 1
		require.NoError(t, err)

		_, err = admin.Resize(ctx, 8)
		require.NoError(t, err)
		sealEventually(t, admin, 1)
		require.Len(t, writer.layout.Load().doc.Gens, 1, "the writer still holds the old layout")

		want := int64(1)
		for i := range 40 {
			res, err := writer.Add(ctx, Event{ID: fmt.Sprintf("add-%d", i), Time: time.Now()}, 1)
			require.NoError(t, err, "fresh event %d", i)
			require.True(t, res.Applied)
			require.Equal(t, uint64(2), res.Gen)
			want++
		}
		// A second writer with the old layout, this time through AddBatch.
		batcher := newCounter(t, rc, Options{Prefix: prefix, Stripes: 4, DedupWindow: window})
		batcher.layout.Store(writer.layout.Load().withoutGensAfter(1))
		adds := make([]Addition, 30)
		for i := range adds {
			adds[i] = Addition{Event: Event{ID: fmt.Sprintf("batch-%d", i), Time: time.Now()}, Delta: 1}
		}
		results, errs := batcher.AddBatch(ctx, adds)
		for i := range adds {
			require.NoError(t, errs[i], "batch event %d", i)
			require.True(t, results[i].Applied)
			want++
		}
		// And after Close.
		closed := newCounter(t, rc, Options{Prefix: prefix, Stripes: 4, DedupWindow: window})
		closed.layout.Store(writer.layout.Load().withoutGensAfter(1))
		require.NoError(t, closed.Close())
		res, err := closed.Add(ctx, Event{ID: "after-close", Time: time.Now()}, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		want++
		require.Equal(t, want, mustSum(t, admin))
	})
}
