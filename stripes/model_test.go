package stripes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"pgregory.net/rapid"
)

// TestModelExactlyOnce checks random interleavings of first attempts, retries (by time and
// stamped), batches and resizes against a model: the set of events counted so far. Every
// Add must report Applied exactly when the event is new to the model, every retry must land
// in its first attempt's generation, and Sum must equal the model's total after every step.
func TestModelExactlyOnce(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		c := newCounter(t, rc, Options{Prefix: celebritytest.Prefix(t), Stripes: rapid.IntRange(1, 6).Draw(rt, "stripes")})
		var (
			events []Event
			gens   = map[string]uint64{}
			deltas = map[string]int64{}
			total  int64
		)
		add := func(rt *rapid.T, ev Event, delta int64, batch bool) {
			var res Result
			var err error
			if batch {
				rs, errs := c.AddBatch(ctx, []Addition{{ev, delta}, {ev, delta}})
				res, err = rs[0], errs[0]
				if err == nil && (errs[1] != nil || rs[1].Applied) {
					rt.Fatalf("the second copy in one batch: %+v %v", rs[1], errs[1])
				}
			} else {
				res, err = c.Add(ctx, ev, delta)
			}
			if err != nil {
				rt.Fatalf("add %+v: %v", ev, err)
			}
			g, seen := gens[ev.ID]
			if res.Applied == seen {
				rt.Fatalf("event %s: applied=%v but seen before=%v", ev.ID, res.Applied, seen)
			}
			if seen && res.Gen != g {
				rt.Fatalf("event %s: retry in generation %d, first attempt in %d", ev.ID, res.Gen, g)
			}
			if !seen {
				gens[ev.ID], deltas[ev.ID] = res.Gen, delta
				total += delta
				events = append(events, ev)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"new": func(rt *rapid.T) {
				ev := Event{ID: fmt.Sprintf("e%d", len(events)), Time: time.Now()}
				if rapid.Bool().Draw(rt, "stamped") {
					var err error
					if ev, err = c.Stamp(ctx, ev.ID); err != nil {
						rt.Fatal(err)
					}
				}
				add(rt, ev, rapid.Int64Range(-3, 5).Filter(func(d int64) bool { return d != 0 }).Draw(rt, "delta"), rapid.Bool().Draw(rt, "batch"))
			},
			"retry": func(rt *rapid.T) {
				if len(events) == 0 {
					rt.Skip("nothing to retry")
				}
				ev := rapid.SampledFrom(events).Draw(rt, "event")
				add(rt, ev, deltas[ev.ID], rapid.Bool().Draw(rt, "batch"))
			},
			"resize": func(rt *rapid.T) {
				if _, err := c.Resize(ctx, rapid.IntRange(1, 6).Draw(rt, "to")); err != nil {
					rt.Fatal(err)
				}
			},
			"": func(rt *rapid.T) {
				got, err := c.Sum(ctx)
				if err != nil || got != total {
					rt.Fatalf("Sum = %d (%v), model = %d", got, err, total)
				}
			},
		})
	})
}
