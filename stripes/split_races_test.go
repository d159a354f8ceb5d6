package stripes

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
)

// Dedup tables split on every addition of one writer (SetMembers 4), looked up by a second
// writer on another client (SetMembers 4096: it never splits) while the first one goes on
// splitting them, with one of the first writer's pipeline replies lost (go-redis sends the
// pipeline again): every lookup after the splits still finds its record, so no event is
// counted twice, Sum is exactly the number of events, and a full second pass counts nothing.
//
// The first writer counts the first events alone, so the tables have split before the
// second writer looks those events up, whichever goroutine runs faster afterwards. A call
// whose reply was lost and which go-redis sent again reports its events as duplicates (see
// Result.Applied), so the Applied flags may fall short of the events by at most that one
// pipeline; Sum may not.
func TestSplitTablesUnderConcurrentBatches(t *testing.T) {
	bothWithFaults(t, 3, func(t *testing.T, rc redis.UniversalClient, inj *faults.Injector) {
		var other redis.UniversalClient
		if _, ok := rc.(*redis.ClusterClient); ok {
			other = celebritytest.SharedCluster(t).Client(t)
		} else {
			other = celebritytest.Standalone(t).Client(t)
		}
		loadScripts(t, rc)
		prefix := celebritytest.NewPrefix(t)
		// SetMembers is not part of the layout: the second writer splits far less eagerly,
		// and must still find the records wherever the first one's splits moved them.
		a := newCounter(t, rc, Options{Prefix: prefix, Stripes: 2, SetMembers: 4})
		b := newCounter(t, other, Options{Prefix: prefix, Stripes: 2, SetMembers: MaxSetMembers})
		ctx := context.Background()
		const n, batch, alone = 1200, 100, 300
		now := time.Now()
		adds := make([]Addition, n)
		for i := range adds {
			adds[i] = Addition{Event: Event{ID: id(i), Time: now}, Delta: 1}
		}
		applied := make([]atomic.Int32, n) // per event, the calls that reported it applied
		send := func(c *Counter, from int) error {
			res, errs := c.AddBatch(ctx, adds[from:from+batch])
			for k := range res {
				if errs[k] != nil {
					return fmt.Errorf("event %d: %w", from+k, errs[k])
				}
				if res[k].Applied {
					applied[from+k].Add(1)
				}
			}
			return nil
		}
		total := func() (sum int) {
			for i := range applied {
				n := int(applied[i].Load())
				require.LessOrEqual(t, n, 1, "event %d was counted by %d calls", i, n)
				sum += n
			}
			return sum
		}

		for s := 0; s < alone; s += batch {
			require.NoError(t, send(a, s))
		}
		require.Equal(t, alone, total())
		// Each split adds a bucket: far more keys than the layout, the birth record, the two
		// stripes and their first buckets.
		split := prefixKeys(t, other, prefix)
		require.Greater(t, split, alone/2, "the dedup tables split into many buckets")

		inj.DropReply(faults.Match{Command: "EVALSHA"}, 1)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for k, c := range []*Counter{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// a counts the rest upwards; b goes through every batch downwards, meeting a
				// midway and then looking up the events a counted alone.
				for s := alone; s < n && k == 0; s += batch {
					if errs[k] = send(c, s); errs[k] != nil {
						return
					}
				}
				for s := n - batch; s >= 0 && k == 1; s -= batch {
					if errs[k] = send(c, s); errs[k] != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		require.NoError(t, errs[0], "the splitting writer")
		require.NoError(t, errs[1], "the other writer")
		require.EqualValues(t, 1, inj.Dropped(), "one pipeline's reply was lost")
		require.GreaterOrEqual(t, total(), n-batch, "only the pipeline sent again may report its events as duplicates")
		require.Equal(t, int64(n), mustSum(t, a))

		before := total()
		for s := 0; s < n; s += batch {
			require.NoError(t, send(a, s))
			require.NoError(t, send(b, s))
		}
		require.Equal(t, before, total(), "a second pass counted events again")
		require.Equal(t, int64(n), mustSum(t, b))
	})
}
