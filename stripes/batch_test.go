package stripes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestBatchWithLostRepliesCountsEachEventOnce(t *testing.T) {
	for _, retries := range []int{-1, 3} {
		t.Run(fmt.Sprintf("MaxRetries=%d", retries), func(t *testing.T) {
			bothWithFaults(t, retries, func(t *testing.T, rc redis.UniversalClient, inj *faults.Injector) {
				c := newCounter(t, rc, Options{Stripes: 8})
				ctx := context.Background()
				before := mustSum(t, c)
				loadScripts(t, rc)
				now := time.Now()
				adds := make([]Addition, 200)
				for k := range adds {
					adds[k] = Addition{Event: Event{ID: fmt.Sprintf("batch-%d", k), Time: now}, Delta: 1}
				}
				// The connection carrying event 17's script is cut after it executed: every
				// reply pipelined on that connection is lost with it.
				inj.DropReply(faults.Match{Command: "EVALSHA", Arg: newRoute(adds[17].Event.ID, c.opts.DedupBits).member}, 1)
				_, errs := c.AddBatch(ctx, adds)
				require.Equal(t, int64(1), inj.Dropped())
				failed := 0
				for k := range adds {
					if errs[k] != nil {
						failed++
						require.NotErrorIs(t, errs[k], ErrInvalid)
					}
				}
				if retries < 0 {
					require.NotZero(t, failed, "without client retries the lost replies surface")
				}
				// The caller retries the whole batch: every event is counted once.
				results, errs := c.AddBatch(ctx, adds)
				for k := range adds {
					require.NoError(t, errs[k])
					require.False(t, results[k].Applied, "event %d was counted by the first batch", k)
				}
				require.Equal(t, before+200, mustSum(t, c))
			})
		})
	}
}

func TestBatchReportsBadItemsAlone(t *testing.T) {
	bothWithFaults(t, 3, func(t *testing.T, rc redis.UniversalClient, _ *faults.Injector) {
		c := newCounter(t, rc, Options{})
		ctx := context.Background()
		now := time.Now()
		results, errs := c.AddBatch(ctx, []Addition{
			{Event{ID: "ok-1", Time: now}, 2},
			{Event{ID: "", Time: now}, 1},
			{Event{ID: "zero", Time: now}, 0},
			{Event{ID: "old", Time: now.Add(-time.Hour)}, 1},
			{Event{ID: "gen", Time: now, Gen: 7}, 1},
			{Event{ID: "ok-2", Time: now}, 3},
			{Event{ID: "ok-1", Time: now}, 2},
		})
		require.NoError(t, errs[0])
		require.True(t, results[0].Applied)
		require.ErrorIs(t, errs[1], ErrInvalid)
		require.ErrorIs(t, errs[2], ErrInvalid)
		require.ErrorIs(t, errs[3], ErrTooOld)
		require.ErrorIs(t, errs[4], ErrUnknownGeneration)
		require.NoError(t, errs[5])
		require.True(t, results[5].Applied)
		require.NoError(t, errs[6])
		require.False(t, results[6].Applied, "the same event twice in one batch counts once")
		require.Equal(t, int64(5), mustSum(t, c))
	})
}
