package stripes

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/script"
)

// The add.lua of v0.1.0, before addfast.lua and split.lua: one script per event, which
// splits dedup sets inline. Processes of that version share counters with this one during a
// rolling upgrade.
//
//go:embed testdata/add_v0.1.0.lua
var previousAddLua string

var previousAddScript = script.New(previousAddLua)

// previousAdd is one attempt to count ev in c's counter as a process of v0.1.0 makes it:
// routed through c's layout, one call of that version's add.lua. done=false leaves the event
// to this version's Add (a redirect, a layout to reread, a stripe sealed since).
func previousAdd(ctx context.Context, c *Counter, ev Event) (applied, done bool, err error) {
	l, err := c.ensureLayout(ctx)
	if err != nil {
		return false, false, err
	}
	call, res, ok, err := c.planAdd(l, ev)
	if !ok || err != nil {
		return false, false, nil
	}
	reply, err := previousAddScript.Run(ctx, c.client, []string{c.keys.of(call.g, res.Stripe)},
		call.g.Gen, call.r.member, 1, ev.Time.UnixMilli(), c.opts.DedupWindow.Milliseconds(),
		c.opts.sliceMs(), c.opts.SetMembers, "0").Int64Slice()
	if err != nil {
		return false, false, err
	}
	switch reply[0] {
	case addApplied:
		return true, true, nil
	case addDuplicate:
		return false, true, nil
	}
	return false, false, nil
}

// TestUpgradeAddOfBothVersionsCountsOnce: a process of v0.1.0 (add.lua with its inline
// splits) and a process of this version (addfast.lua with the views it learns, add.lua,
// split.lua) send every event of one counter (in opposite orders), each retrying after lost replies, with dedup
// sets small enough that both versions split them many times, and a resize from 1 to 4
// stripes half-way. Every event is counted once: the Sum is the number of events and no
// event is reported applied twice, whichever version counted it and whichever version
// split its set.
func TestUpgradeAddOfBothVersionsCountsOnce(t *testing.T) {
	run := func(t *testing.T, clients [2]redis.UniversalClient, injs [2]*faults.Injector) {
		ctx := t.Context()
		o := Options{Prefix: celebritytest.NewPrefix(t), Stripes: 1, SetMembers: 16, DedupWindow: time.Minute, SealInterval: -1}
		var cs [2]*Counter // 0: the previous version, 1: this one
		for i := range cs {
			loadScripts(t, clients[i])
			require.NoError(t, script.Load(ctx, celebritytest.AdminOf(t, clients[i]), previousAddScript))
			cs[i] = newCounter(t, clients[i], o)
		}
		const events = 600
		evs := make([]Event, events)
		now := time.Now()
		for k := range evs {
			evs[k] = Event{ID: fmt.Sprintf("e%d", k), Time: now}
		}
		var applied [events]atomic.Int64
		var byPrevious atomic.Int64
		var wg sync.WaitGroup
		resized := make(chan struct{})
		for w := range cs {
			wg.Go(func() {
				for j := range evs {
					k := j
					if w == 1 {
						k = events - 1 - j // the two meet half-way: each counts about half
					}
					ev := evs[k]
					if w == 1 && j == events/2 {
						_, err := cs[1].Resize(ctx, 4)
						require.NoError(t, err)
						close(resized)
					}
					if w == 0 && j == events/2 {
						<-resized // both halves see both layouts
					}
					if k%7 == 0 {
						injs[w].DropReply(faults.Match{Command: "EVALSHA", Arg: newRoute(ev.ID, DefaultDedupBits).member}, 1)
					}
					for {
						var res Result
						var err error
						done := false
						if w == 0 {
							res.Applied, done, err = previousAdd(ctx, cs[0], ev)
							if done && res.Applied {
								byPrevious.Add(1)
							}
						}
						if !done && err == nil {
							res, err = cs[w].Add(ctx, ev, 1)
						}
						if err != nil {
							if errors.Is(err, faults.ErrReplyDropped) || errors.Is(err, ErrConflict) {
								continue // the host retries with the same Event
							}
							t.Errorf("writer %d, %s: %v", w, ev.ID, err)
							return
						}
						if res.Applied {
							applied[k].Add(1)
						}
						break
					}
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(events), mustSum(t, cs[1]))
		require.Equal(t, int64(events), mustSum(t, cs[0]))
		for k := range evs {
			// An attempt whose reply was lost may have counted the event: its retry then
			// reports a duplicate, so an event is reported applied once or not at all.
			require.LessOrEqual(t, applied[k].Load(), int64(1), "%s reported applied twice", evs[k].ID)
		}
		require.Positive(t, byPrevious.Load(), "the previous version counted some events")
		require.Less(t, byPrevious.Load(), int64(events), "this version counted some events")
		require.Positive(t, injs[0].Dropped()+injs[1].Dropped(), "replies were lost")
		l, err := cs[1].loadLayout(ctx)
		require.NoError(t, err)
		require.Len(t, l.doc.Gens, 2)
	}
	onTwoLossyClients(t, true, run)
}
