//go:build review

// Tagged: on main it fails at once (the dedup tables did not split: 6 keys, and not every
// event counted on the cluster); to be looked into before it runs by default.

package stripes

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
)

// Dedup tables split on every addition of one writer (SetMembers 4), filled by two writers
// on separate clients sending the same batches at once, one of them losing a pipeline's reply (which
// go-redis sends again): every lookup after the splits still finds its record, so each
// event is counted once and a full second pass counts nothing.
func TestReviewSplitTablesUnderConcurrentBatches(t *testing.T) {
	bothWithFaults(t, 3, func(t *testing.T, rc redis.UniversalClient, inj *faults.Injector) {
		var other redis.UniversalClient
		if _, ok := rc.(*redis.ClusterClient); ok {
			other = celebritytest.SharedCluster(t).Client(t)
		} else {
			other = celebritytest.Standalone(t).Client(t)
		}
		prefix := celebritytest.Prefix(t)
		// SetMembers is not part of the layout: the second writer splits far less eagerly,
		// and must still find the records wherever the first one's splits moved them.
		a := newCounter(t, rc, Options{Prefix: prefix, Stripes: 2, SetMembers: 4})
		b := newCounter(t, other, Options{Prefix: prefix, Stripes: 2, SetMembers: MaxSetMembers})
		ctx := context.Background()
		const n, batch = 1200, 100
		now := time.Now()
		adds := make([]Addition, n)
		for i := range adds {
			adds[i] = Addition{Event: Event{ID: id(i), Time: now}, Delta: 1}
		}
		var applied atomic.Int64
		send := func(c *Counter, part []Addition) {
			res, errs := c.AddBatch(ctx, part)
			for k := range part {
				require.NoError(t, errs[k])
				if res[k].Applied {
					applied.Add(1)
				}
			}
		}
		inj.DropReply(faults.Match{Command: "EVALSHA"}, 1)
		var wg sync.WaitGroup
		for k, c := range []*Counter{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The writers go through the batches in opposite orders and meet midway.
				for j := range n / batch {
					s := j * batch
					if k == 1 {
						s = n - batch - s
					}
					send(c, adds[s:s+batch])
				}
			}()
		}
		wg.Wait()
		require.EqualValues(t, 1, inj.Dropped(), "one pipeline's reply was lost")
		require.Greater(t, prefixKeys(t, other, prefix), 100, "the dedup tables split into many buckets")
		require.Equal(t, int64(n), applied.Load())
		require.Equal(t, int64(n), mustSum(t, a))
		send(a, adds)
		send(b, adds)
		require.Equal(t, int64(n), applied.Load(), "a second pass counted events again")
		require.Equal(t, int64(n), mustSum(t, b))
	})
}
