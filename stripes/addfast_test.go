package stripes

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

// shaCounter is a go-redis hook that counts EVALSHA calls per script.
type shaCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *shaCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *shaCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && cmd.Name() == "evalsha" {
			h.mu.Lock()
			h.n[args[1].(string)]++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *shaCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			_ = h.ProcessHook(func(context.Context, redis.Cmder) error { return nil })(ctx, cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *shaCounter) calls(s interface{ Hash() string }) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[s.Hash()]
}

// TestMostEventsTakeTheFastPath: the ring field, the state string and the set that Go derives
// for addfast.lua must be the ones add.lua stores, or every event would quietly take the full
// path. 2,000 new events of one slice in a 1-stripe counter (a home record) and a 4-stripe
// one, with sets small enough to split often, through Add and AddBatch: add.lua runs at most
// twice per stripe (its first event, and margin for one view given up), addfast.lua for the
// rest, and every event is counted once. It fails if Go's ring field is off by one.
func TestMostEventsTakeTheFastPath(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := t.Context()
		for _, n := range []int{1, 4} {
			hook := &shaCounter{n: map[string]int{}}
			rc.AddHook(hook)
			loadScripts(t, rc)
			c := newCounter(t, rc, Options{Stripes: n, SetMembers: 64, DedupWindow: time.Hour})
			now := time.Now()
			const events = 2000
			var batch []Addition
			for k := range events {
				ev := Event{ID: strconv.Itoa(n) + "-" + strconv.Itoa(k), Time: now}
				if k%2 == 0 {
					res, err := c.Add(ctx, ev, 1)
					require.NoError(t, err)
					require.True(t, res.Applied)
					continue
				}
				if batch = append(batch, Addition{Event: ev, Delta: 1}); len(batch) == 50 {
					_, errs := c.AddBatch(ctx, batch)
					for _, err := range errs {
						require.NoError(t, err)
					}
					batch = batch[:0]
				}
			}
			require.Equal(t, int64(events), mustSum(t, c))
			full, fast := hook.calls(addScript), hook.calls(addFastScript)
			require.Positive(t, hook.calls(splitScript), "the sets split")
			require.LessOrEqual(t, full, 2*n, "add.lua ran %d times for %d events on %d stripes (addfast.lua %d)", full, events, n, fast)
			require.GreaterOrEqual(t, fast, events-2*n)
		}
	})
}

// TestSplitHappensOncePerState: split.lua called twice with the state it saw (a lost reply
// re-sent by go-redis, or two writers that found the same set due) splits once; the second
// call replies the state the first left.
func TestSplitHappensOncePerState(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := t.Context()
		c := newCounter(t, rc, Options{Stripes: 1, SetMembers: 1 << 12, DedupWindow: time.Hour})
		now := time.Now()
		for k := range 40 {
			_, err := c.Add(ctx, Event{ID: "e" + strconv.Itoa(k), Time: now}, 1)
			require.NoError(t, err)
		}
		l := mustLayout(t, c)
		g := l.gen(1)
		key, slice := c.keys.of(g, 0), now.UnixMilli()/c.opts.sliceMs()
		expire := (slice+1)*c.opts.sliceMs() + c.opts.DedupWindow.Milliseconds() + c.opts.sliceMs()
		args := []any{slice, c.ringField(slice), "0:0", expire}
		var replies [][]int64
		for range 2 {
			st, err := splitScript.Run(ctx, rc, []string{key}, args...).Int64Slice()
			require.NoError(t, err)
			replies = append(replies, st)
		}
		require.Equal(t, [][]int64{{1, 0}, {1, 0}}, replies, "one split (level 0 to 1), then the same state")
		node := nodeFor(t, rc, key)
		var records int64
		for b := range 2 {
			n, err := node.SCard(ctx, setKey(key, slice, uint64(b))).Result()
			require.NoError(t, err)
			require.Greater(t, n, int64(1), "set %d holds its marker and records", b)
			records += n - 1
		}
		require.Equal(t, int64(40), records, "every record is in one of the two sets")
		for k := range 40 { // and each is found there: a retry is a duplicate
			res, err := c.Add(ctx, Event{ID: "e" + strconv.Itoa(k), Time: now}, 1)
			require.NoError(t, err)
			require.False(t, res.Applied)
		}
		require.Equal(t, int64(40), mustSum(t, c))
	})
}
