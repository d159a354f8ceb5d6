package stripes

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestSameEventFrom100GoroutinesCountsOnce(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{Stripes: 16})
		ctx := context.Background()
		before := mustSum(t, c)
		ev := Event{ID: "view-42", Time: time.Now()}
		var wg sync.WaitGroup
		results := make(chan Result, 100)
		for range 100 {
			wg.Go(func() {
				res, err := c.Add(ctx, ev, 7)
				if err != nil {
					t.Error(err)
					return
				}
				results <- res
			})
		}
		wg.Wait()
		close(results)
		applied := 0
		for r := range results {
			if r.Applied {
				applied++
			}
		}
		require.Equal(t, 1, applied, "exactly one call applies the event")
		require.Equal(t, before+7, mustSum(t, c))
		st := c.Stats()
		require.Equal(t, uint64(1), st.Applied)
		require.Equal(t, uint64(99), st.Duplicates)
	})
}

func TestLostReplyThenCallerRetryCountsOnce(t *testing.T) {
	bothWithFaults(t, -1, func(t *testing.T, rc redis.UniversalClient, inj *faults.Injector) {
		c := newCounter(t, rc, Options{Stripes: 8})
		ctx := context.Background()
		before := mustSum(t, c)
		ev := Event{ID: "lost-reply-1", Time: time.Now()}
		r := newRoute(ev.ID, c.opts.DedupBits)
		loadScripts(t, rc)
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: r.member}, 1)
		_, err := c.Add(ctx, ev, 3)
		require.Error(t, err, "the reply was dropped and go-redis must not retry (MaxRetries -1)")
		require.Equal(t, int64(1), inj.Dropped())
		require.Equal(t, before+3, mustSum(t, c), "the script ran before its reply was lost")

		res, err := c.Add(ctx, ev, 3) // the caller's retry
		require.NoError(t, err)
		require.False(t, res.Applied, "the retry finds the event already counted")
		require.Equal(t, before+3, mustSum(t, c))
	})
}

func TestLostReplyThenGoRedisRetryCountsOnce(t *testing.T) {
	bothWithFaults(t, 3, func(t *testing.T, rc redis.UniversalClient, inj *faults.Injector) {
		c := newCounter(t, rc, Options{Stripes: 8})
		ctx := context.Background()
		before := mustSum(t, c)
		ev := Event{ID: "lost-reply-2", Time: time.Now()}
		r := newRoute(ev.ID, c.opts.DedupBits)
		loadScripts(t, rc)
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: r.member}, 1)
		res, err := c.Add(ctx, ev, 5)
		require.NoError(t, err, "go-redis retried the command itself")
		require.Equal(t, int64(1), inj.Dropped())
		require.False(t, res.Applied, "the retried script found its own first execution")
		require.Equal(t, before+5, mustSum(t, c))
	})
}

func TestNegativeDeltasAndRetries(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{})
		ctx := context.Background()
		now := time.Now()
		for _, step := range []struct {
			id      string
			delta   int64
			applied bool
			sum     int64
		}{
			{"a", 10, true, 10},
			{"b", -4, true, 6},
			{"b", -4, false, 6},
			{"c", -20, true, -14},
			{"a", 10, false, -14},
		} {
			res, err := c.Add(ctx, Event{ID: step.id, Time: now}, step.delta)
			require.NoError(t, err)
			require.Equal(t, step.applied, res.Applied, "event %s", step.id)
			require.Equal(t, step.sum, mustSum(t, c), "after event %s", step.id)
		}
	})
}

func TestEventTimeOutsideWindow(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{DedupWindow: time.Second})
		ctx := context.Background()
		before := mustSum(t, c)

		_, err := c.Add(ctx, Event{ID: "old", Time: time.Now().Add(-time.Minute)}, 1)
		require.ErrorIs(t, err, ErrTooOld)
		_, err = c.Add(ctx, Event{ID: "future", Time: time.Now().Add(time.Minute)}, 1)
		require.ErrorIs(t, err, ErrInvalid)

		require.Equal(t, before, mustSum(t, c))
		require.Equal(t, uint64(1), c.Stats().TooOld)
		require.Equal(t, 4, prefixKeys(t, rc, c.opts.Prefix)-2, "only the layout, the birth record and the 4 stripes exist")
	})
}

func TestDedupSetsSplitAndKeepIntsetEncoding(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{Stripes: 1, SetMembers: 32})
		ctx := context.Background()
		now := time.Now()
		const n = 2000
		for i := range n {
			res, err := c.Add(ctx, Event{ID: id(i), Time: now}, 1)
			require.NoError(t, err)
			require.True(t, res.Applied, "event %d", i)
		}
		for i := range n {
			res, err := c.Add(ctx, Event{ID: id(i), Time: now}, 1)
			require.NoError(t, err)
			require.False(t, res.Applied, "retry of event %d", i)
		}
		require.Equal(t, int64(n), mustSum(t, c))

		l, err := c.loadLayout(ctx)
		require.NoError(t, err)
		stripe := c.keys.of(&l.doc.Gens[0], 0)
		node := nodeFor(t, rc, stripe)
		sl := now.UnixMilli() / c.opts.sliceMs()
		ring := 2*((c.opts.DedupWindow.Milliseconds()+c.opts.sliceMs()-1)/c.opts.sliceMs()) + 3
		state, err := node.HGet(ctx, stripe, "d"+strconv.FormatInt(sl%ring, 10)).Result()
		require.NoError(t, err)
		parts := strings.Split(state, ":")
		require.Len(t, parts, 3)
		require.Equal(t, strconv.FormatInt(sl, 10), parts[0])
		level, _ := strconv.Atoi(parts[1])
		split, _ := strconv.Atoi(parts[2])

		keys, err := node.Keys(ctx, stripe+":e:*").Result()
		require.NoError(t, err)
		require.Equal(t, 1<<level+split, len(keys), "one set per bucket of the linear hash table (%s)", state)
		require.Greater(t, len(keys), n/32, "the sets were split")
		records := 0
		for _, k := range keys {
			enc, err := node.ObjectEncoding(ctx, k).Result()
			require.NoError(t, err)
			require.Equal(t, "intset", enc, "set %s", k)
			card, err := node.SCard(ctx, k).Result()
			require.NoError(t, err)
			require.LessOrEqual(t, card, int64(32), "set %s", k)
			// The set's name says which records it holds: a bucket below the split pointer,
			// or added by a split, uses one selector bit more.
			b, err := strconv.Atoi(k[strings.LastIndex(k, ":")+1:])
			require.NoError(t, err)
			bits := level
			if b < split || b >= 1<<level {
				bits++
			}
			members, err := node.SMembers(ctx, k).Result()
			require.NoError(t, err)
			require.Contains(t, members, bucketMarker, "set %s was created with its marker", k)
			for _, m := range members {
				if m == bucketMarker {
					continue
				}
				records++
				v, err := strconv.ParseUint(m, 10, 64)
				require.NoError(t, err)
				require.Equal(t, uint64(b), selectorOf(v)%(1<<bits), "record %s in %s", m, k)
			}
			ttl, err := node.PTTL(ctx, k).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, time.Duration(0), "set %s expires", k)
		}
		require.Equal(t, n, records, "every event has exactly one record")
	})
}

// bucketOf returns the key of the dedup set that holds ev's record in c's only stripe.
func bucketOf(t *testing.T, rc redis.UniversalClient, c *Counter, ev Event) (string, redis.Cmdable) {
	t.Helper()
	ctx := context.Background()
	l, err := c.loadLayout(ctx)
	require.NoError(t, err)
	stripe := c.keys.of(&l.doc.Gens[0], 0)
	node := nodeFor(t, rc, stripe)
	member := newRoute(ev.ID, c.opts.DedupBits).member
	keys, err := node.Keys(ctx, stripe+":e:*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		if ok, err := node.SIsMember(ctx, k, member).Result(); err == nil && ok {
			return k, node
		}
	}
	t.Fatalf("no dedup set of %s holds %s", stripe, member)
	return "", nil
}

func TestRetryAfterItsDedupSetExpiredIsRefused(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		// The event's set expires one window plus one slice after its slice ends, while the
		// stripe still names the slice in its ring.
		c := newCounter(t, rc, Options{Stripes: 1, DedupWindow: 3 * time.Second})
		ctx := context.Background()
		_, err := c.Add(ctx, Event{ID: "first", Time: time.Now()}, 1) // creates the layout
		require.NoError(t, err)
		ev := Event{ID: "late", Time: time.Now()}
		res, err := c.Add(ctx, ev, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		key, node := bucketOf(t, rc, c, ev)
		require.Eventually(t, func() bool { return node.Exists(ctx, key).Val() == 0 }, 30*time.Second, 20*time.Millisecond)

		_, err = c.Add(ctx, ev, 1)
		require.ErrorIs(t, err, ErrTooOld, "a retry whose record may be gone is refused, never counted again")
		require.Equal(t, int64(2), mustSum(t, c))
		require.Zero(t, node.Exists(ctx, key).Val(), "the refused retry left no set behind")
	})
}

func TestLostDedupSetIsRecreatedWithItsExpiry(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{Stripes: 1})
		ctx := context.Background()
		now := time.Now()
		first := Event{ID: "first", Time: now}
		_, err := c.Add(ctx, first, 1)
		require.NoError(t, err)
		key, node := bucketOf(t, rc, c, first)
		require.NoError(t, node.Del(ctx, key).Err()) // the set is lost (eviction, a partial restore)

		res, err := c.Add(ctx, Event{ID: "second", Time: now}, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.Equal(t, int64(2), mustSum(t, c))
		key, node = bucketOf(t, rc, c, Event{ID: "second"})
		ttl, err := node.PTTL(ctx, key).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0), "the recreated set %s expires with its slice", key)
		require.Contains(t, node.SMembers(ctx, key).Val(), bucketMarker)
	})
}
