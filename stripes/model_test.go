package stripes

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
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
	celebritytest.Long(t)
	rc := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		c := newCounter(t, rc, Options{Prefix: celebritytest.NewPrefix(t), Stripes: rapid.IntRange(1, 6).Draw(rt, "stripes")})
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

// modelWindow is the dedup window of the model runs with sealing. A new event is stamped
// with the local time and must reach its stripe within one window to be counted, and on a
// loaded machine one Add has taken over 200ms; 2s leaves a margin of ten. The sealer's clock
// runs ahead by a window at a time, so generations are still sealed and pruned within a run.
const modelWindow = 2 * time.Second

// TestModelWritersWithOldLayoutsAndSealing runs random steps of several writers, each
// holding a layout of its own age (pinned at random to a layout read earlier), against
// resizes and manual seals by a sealer whose clock runs ahead (so that generations are
// sealed and pruned while writers still hold them). Every new event must be counted at
// once; a retry must find its first attempt (or be refused as too old, never counted
// again); Sum must equal the model after every step.
func TestModelWritersWithOldLayoutsAndSealing(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	const window = modelWindow
	rapid.Check(t, func(rt *rapid.T) {
		prefix := celebritytest.NewPrefix(t)
		var ahead atomic.Int64
		sealer := newCounter(t, rc, Options{Prefix: prefix, DedupWindow: window, Stripes: 2,
			Clock: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
		writers := make([]*Counter, 3)
		for i := range writers {
			writers[i] = newCounter(t, rc, Options{Prefix: prefix, DedupWindow: window, Stripes: 2, LayoutMaxAge: time.Nanosecond})
		}
		var (
			events  []Event
			gens    = map[string]uint64{}
			deltas  = map[string]int64{}
			history []*layout
			total   int64
		)
		remember := func() {
			l, err := sealer.loadLayout(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			history = append(history, l)
		}
		writer := func(rt *rapid.T) *Counter { return writers[rapid.IntRange(0, len(writers)-1).Draw(rt, "writer")] }
		add := func(w *Counter, ev Event, delta int64, batch bool) (Result, error) {
			if batch {
				rs, errs := w.AddBatch(ctx, []Addition{{ev, delta}})
				return rs[0], errs[0]
			}
			return w.Add(ctx, ev, delta)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"new": func(rt *rapid.T) {
				w := writer(rt)
				ev := Event{ID: fmt.Sprintf("e%d", len(events)), Time: time.Now()}
				if rapid.Bool().Draw(rt, "stamped") {
					var err error
					if ev, err = w.Stamp(ctx, ev.ID); err != nil {
						rt.Fatal(err)
					}
				}
				delta := rapid.Int64Range(1, 5).Draw(rt, "delta")
				res, err := add(writer(rt), ev, delta, rapid.Bool().Draw(rt, "batch"))
				if err != nil || !res.Applied {
					rt.Fatalf("new event %+v: %+v, %v", ev, res, err)
				}
				gens[ev.ID], deltas[ev.ID] = res.Gen, delta
				total += delta
				events = append(events, ev)
			},
			"retry": func(rt *rapid.T) {
				if len(events) == 0 {
					rt.Skip("nothing to retry")
				}
				ev := events[rapid.IntRange(0, len(events)-1).Draw(rt, "event")]
				res, err := add(writer(rt), ev, deltas[ev.ID], rapid.Bool().Draw(rt, "batch"))
				switch {
				case errors.Is(err, ErrTooOld):
				case err != nil:
					rt.Fatalf("retry %+v: %v", ev, err)
				case res.Applied || res.Gen != gens[ev.ID]:
					rt.Fatalf("retry %+v counted again or elsewhere: %+v, first in generation %d", ev, res, gens[ev.ID])
				}
			},
			"resize": func(rt *rapid.T) {
				if _, err := writer(rt).Resize(ctx, rapid.IntRange(1, 5).Draw(rt, "to")); err != nil {
					rt.Fatal(err)
				}
				remember()
			},
			"pin an old layout": func(rt *rapid.T) {
				if len(history) == 0 {
					rt.Skip("no layout read yet")
				}
				// A copy read long ago (the sealer's clock stamped it in the future).
				old := *history[rapid.IntRange(0, len(history)-1).Draw(rt, "layout")]
				old.read = time.Time{}
				writer(rt).layout.Store(&old)
			},
			"seal with the sealer's clock a window ahead": func(rt *rapid.T) {
				ahead.Add(int64(window + window/4 + time.Millisecond))
				if _, err := sealer.Seal(ctx); err != nil {
					rt.Fatal(err)
				}
			},
			"": func(rt *rapid.T) {
				got, err := sealer.Sum(ctx)
				if err != nil || got != total {
					rt.Fatalf("Sum = %d (%v), model = %d", got, err, total)
				}
			},
		})
	})
}

// TestModelFamilyPromoteDemote runs random steps of two families (two processes' worth, each
// with its own Counters) over three names, whose loops promote and demote names as a
// detector says, against manual seals by a sealer whose clock runs ahead. New events must be
// counted at once, retries never again, and every name's Sum must equal the model after
// every step.
func TestModelFamilyPromoteDemote(t *testing.T) {
	celebritytest.Long(t)
	rc := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	const window = modelWindow
	names := []string{"a", "b", "c"}
	var maxGen atomic.Uint64
	defer func() { t.Logf("newest generation seen by a sealer: %d", maxGen.Load()) }()
	rapid.Check(t, func(rt *rapid.T) {
		prefix := celebritytest.NewPrefix(t)
		det := &setDetector{hot: map[string]bool{}}
		var fams [2]*Family
		for i := range fams {
			fams[i] = newFamily(t, rc, FamilyOptions{Counter: Options{Prefix: prefix, DedupWindow: window},
				Interval: -1, MaxStaleness: -1, MaxNames: 2, HotStripes: 4, CoolAfter: time.Nanosecond, Detector: det})
		}
		var ahead atomic.Int64
		sealers := map[string]*Counter{}
		for _, n := range names {
			sealers[n] = newCounter(t, rc, Options{Prefix: prefix, Name: n, DedupWindow: window, Stripes: 1,
				Clock: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
		}
		type rec struct {
			name  string
			ev    Event
			delta int64
			gen   uint64
		}
		var events []rec
		totals := map[string]int64{}
		fam := func(rt *rapid.T) *Family { return fams[rapid.IntRange(0, 1).Draw(rt, "family")] }
		add := func(rt *rapid.T, r rec) (Result, error) {
			f := fam(rt)
			if rapid.Bool().Draw(rt, "batch") {
				other := FamilyAddition{Name: rapid.SampledFrom(names).Draw(rt, "other"), Event: Event{ID: "probe", Time: time.Now()}, Delta: 1}
				rs, errs := f.AddBatch(ctx, []FamilyAddition{{r.name, r.ev, r.delta}, other})
				if errs[1] == nil && rs[1].Applied {
					totals[other.Name]++ // "probe" once per name (a later probe may fall in another slice)
					events = append(events, rec{other.Name, other.Event, 1, rs[1].Gen})
				}
				return rs[0], errs[0]
			}
			return f.Add(ctx, r.name, r.ev, r.delta)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"new": func(rt *rapid.T) {
				r := rec{name: rapid.SampledFrom(names).Draw(rt, "name"), ev: Event{ID: fmt.Sprintf("e%d", len(events)), Time: time.Now()},
					delta: rapid.Int64Range(1, 5).Draw(rt, "delta")}
				res, err := add(rt, r)
				if err != nil || !res.Applied {
					rt.Fatalf("new event %+v: %+v, %v", r, res, err)
				}
				r.gen = res.Gen
				totals[r.name] += r.delta
				events = append(events, r)
			},
			"retry": func(rt *rapid.T) {
				if len(events) == 0 {
					rt.Skip("nothing to retry")
				}
				r := events[rapid.IntRange(0, len(events)-1).Draw(rt, "event")]
				res, err := add(rt, r)
				switch {
				case errors.Is(err, ErrTooOld):
				case err != nil:
					rt.Fatalf("retry %+v: %v", r, err)
				case res.Applied || res.Gen != r.gen:
					rt.Fatalf("retry %+v counted again or elsewhere: %+v", r, res)
				}
			},
			"promote": func(rt *rapid.T) {
				det.set(rapid.SampledFrom(names).Draw(rt, "name"), true)
				if err := fam(rt).Tick(ctx); err != nil {
					rt.Fatal(err)
				}
			},
			"demote": func(rt *rapid.T) {
				det.set(rapid.SampledFrom(names).Draw(rt, "name"), false)
				f := fam(rt)
				for range 2 { // the first round starts the cooling, the second demotes
					if err := f.Tick(ctx); err != nil {
						rt.Fatal(err)
					}
				}
			},
			"seal with the sealer's clock a window ahead": func(rt *rapid.T) {
				ahead.Add(int64(window + window/4 + time.Millisecond))
				for _, n := range names {
					if _, err := sealers[n].Seal(ctx); err != nil {
						rt.Fatal(err)
					}
				}
			},
			"": func(rt *rapid.T) {
				sums, errs := fam(rt).SumMany(ctx, names)
				for i, n := range names {
					if errs[i] != nil || sums[i] != totals[n] {
						rt.Fatalf("Sum(%s) = %d (%v), model = %d", n, sums[i], errs[i], totals[n])
					}
					if l := sealers[n].layout.Load(); l != nil {
						maxGen.Store(max(maxGen.Load(), l.current().Gen))
					}
				}
			},
		})
	})
}
