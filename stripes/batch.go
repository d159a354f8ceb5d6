package stripes

import (
	"context"
	"fmt"

	"github.com/celebrity-go/celebrity/internal/script"
)

// Addition is one event and its delta for [Counter.AddBatch].
type Addition struct {
	Event Event
	Delta int64
}

// AddBatch counts many events with one pipeline of add.lua calls (one per event, each in
// its stripe's slot), for hosts that ingest events in batches. It returns one Result and one
// error per addition, with the meaning they have for [Counter.Add]: each addition is
// independent, and one that failed with a non-sentinel error may or may not have been
// counted and should be retried with the same Event. Events redirected by a stripe (a
// resize in progress) or needing a fresh layout are finished one by one through Add.
func (c *Counter) AddBatch(ctx context.Context, adds []Addition) ([]Result, []error) {
	counters := make([]*Counter, len(adds))
	for k := range counters {
		counters[k] = c
	}
	return addBatch(ctx, c.client, counters, adds)
}

// addBatch counts adds[k] in counters[k], every addition in one pipeline on client (which
// go-redis splits per master on a cluster). It routes each addition through its counter's
// cached layout (planAdd), sends the routed ones to add.lua at once (sendBatch), and
// finishes the rest one by one through Add: those whose counter has no layout that routes
// them (a resize in progress, a layout that may be stale) and those a stripe redirected.
func addBatch(ctx context.Context, client Client, counters []*Counter, adds []Addition) ([]Result, []error) {
	results := make([]Result, len(adds))
	errs := make([]error, len(adds))
	var routed []batchCall
	var slow []int
	for k, a := range adds {
		c := counters[k]
		if errs[k] = c.checkAdd(a.Event, a.Delta); errs[k] != nil {
			continue
		}
		l := c.layout.Load()
		if l == nil {
			var err error
			if l, err = c.ensureLayout(ctx); err != nil {
				errs[k] = err
				continue
			}
		}
		call, res, ok, err := c.planAdd(l, a.Event)
		switch {
		case !ok:
			slow = append(slow, k)
		case err != nil:
			results[k], errs[k] = res, err
			c.count(res, err)
		default:
			call.k, results[k] = k, res
			routed = append(routed, call)
		}
	}
	slow = append(slow, sendBatch(ctx, client, counters, adds, routed, results, errs)...)
	for _, k := range slow {
		results[k], errs[k] = counters[k].Add(ctx, adds[k].Event, adds[k].Delta)
	}
	return results, errs
}

// batchCall is one addition of a batch routed to a stripe: adds[k] goes to generation g.
type batchCall struct {
	k int
	g *genDoc
	r route
}

// planAdd routes ev through layout l without I/O, as Add's first attempt would. It returns
// the call for ev's stripe and its Result so far (ok=true), with an error that ends the
// addition when its generation is folded (ErrTooOld); or ok=false when l cannot route ev
// (an event before the floor, an unknown generation, or one past every generation's
// boundary), which Add settles with a fresh layout.
func (c *Counter) planAdd(l *layout, ev Event) (call batchCall, res Result, ok bool, err error) {
	call.r = newRoute(ev.ID, c.opts.DedupBits)
	gi, err := c.firstGen(l, ev)
	if err != nil {
		return call, Result{}, false, nil
	}
	for ; gi < len(l.doc.Gens); gi++ {
		g := &l.doc.Gens[gi]
		res, skip, err := c.target(l, g, ev, call.r)
		if !skip {
			call.g = g
			return call, res, true, err
		}
	}
	return call, Result{}, false, nil
}

// sendBatch runs add.lua for every routed call in one pipeline and records each outcome in
// results and errs. It returns the additions that a stripe redirected to a later
// generation or found stale, for Add to finish.
func sendBatch(ctx context.Context, client Client, counters []*Counter, adds []Addition, routed []batchCall, results []Result, errs []error) (slow []int) {
	if len(routed) == 0 {
		return nil
	}
	calls := make([]script.Call, len(routed))
	for j, rc := range routed {
		calls[j] = counters[rc.k].addCall(rc.g, results[rc.k].Stripe, adds[rc.k].Event, rc.r, adds[rc.k].Delta)
	}
	for j, cmd := range runAll(ctx, client, calls) {
		rc := routed[j]
		k, c, key := rc.k, counters[rc.k], calls[j].Keys[0]
		reply, err := cmd.Result()
		if err != nil {
			errs[k] = fmt.Errorf("stripes: add %q to %s: %w", adds[k].Event.ID, key, err)
			continue
		}
		if c.notTaken(rc.g, results[k].Stripe, reply) {
			slow = append(slow, k) // Add runs add.lua, as the view is gone
			continue
		}
		res, next, stale, err := c.settle(ctx, rc.g, results[k], adds[k].Event, adds[k].Delta, calls[j], reply)
		if next || stale {
			slow = append(slow, k)
			continue
		}
		results[k], errs[k] = res, err
		c.count(res, err)
	}
	return slow
}
