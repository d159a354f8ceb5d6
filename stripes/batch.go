package stripes

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
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
// go-redis splits per master on a cluster).
func addBatch(ctx context.Context, client Client, counters []*Counter, adds []Addition) ([]Result, []error) {
	results := make([]Result, len(adds))
	errs := make([]error, len(adds))
	type call struct {
		g   *genDoc
		key string
		r   route
		cmd *redis.Cmd
	}
	var calls, slow []int
	pending := make([]call, len(adds))
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
		r := newRoute(a.Event.ID, c.opts.DedupBits)
		gi, err := c.firstGen(l, a.Event)
		if err != nil {
			slow = append(slow, k)
			continue
		}
		for ; gi < len(l.doc.Gens); gi++ {
			g := &l.doc.Gens[gi]
			res, skip, err := c.target(l, g, a.Event, r)
			if skip {
				continue
			}
			results[k], errs[k] = res, err
			if err != nil {
				c.count(res, err)
			} else {
				pending[k] = call{g: g, r: r}
				calls = append(calls, k)
			}
			break
		}
		if gi == len(l.doc.Gens) {
			slow = append(slow, k)
		}
	}
	for attempt := 0; attempt < 2 && len(calls) > 0; attempt++ {
		_, _ = client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range calls {
				pc := &pending[k]
				key, args := counters[k].addCall(pc.g, results[k].Stripe, adds[k].Event, pc.r, adds[k].Delta)
				pc.key = key
				pc.cmd = addScript.EvalSha(ctx, p, []string{key}, args...)
			}
			return nil
		})
		var noScript []int
		for _, k := range calls {
			c, pc := counters[k], &pending[k]
			reply, err := pc.cmd.Int64Slice()
			switch {
			case redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0:
				noScript = append(noScript, k)
				continue
			case err != nil:
				errs[k] = fmt.Errorf("stripes: add %q to %s: %w", adds[k].Event.ID, pc.key, err)
				continue
			}
			res, next, stale, err := c.interpret(pc.g, results[k], adds[k].Event, adds[k].Delta, pc.key, reply)
			if next || stale {
				slow = append(slow, k)
				continue
			}
			results[k], errs[k] = res, err
			c.count(res, err)
		}
		calls = noScript
		if len(calls) > 0 {
			if err := counters[calls[0]].loadScript(ctx, addScript); err != nil {
				for _, k := range calls {
					errs[k] = err
				}
				calls = nil
			}
		}
	}
	for _, k := range slow {
		results[k], errs[k] = counters[k].Add(ctx, adds[k].Event, adds[k].Delta)
	}
	return results, errs
}
