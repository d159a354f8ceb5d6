package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celebrity-go/celebrity/examples/internal/redisenv"
	"github.com/celebrity-go/celebrity/stripes"
)

const (
	viewers        = 40
	viewsPerViewer = 50
	retryShare     = 0.3 // share of events sent twice (a client retry after a timeout)
)

// views counts page views of the course with a striped counter: every event is counted once
// although 30% are sent twice, and the stripe count goes from 4 to 16 half way.
func views(ctx context.Context, t *redisenv.Target, run string, c *checker) error {
	fmt.Printf("1. page views: %d viewers x %d views, %.0f%% of events retried, stripes 4 -> 16 mid-stream\n",
		viewers, viewsPerViewer, retryShare*100)
	ctr, err := stripes.New(t.Client, stripes.Options{
		Name: "course:72:views", Prefix: run + ":stripes:", Stripes: 4,
	})
	if err != nil {
		return err
	}
	defer ctr.Close()

	var sent, applied, dups, errs atomic.Int64
	half := make(chan struct{})
	var halfOnce sync.Once
	first := make([]stripes.Event, viewers) // each viewer's first event, retried at the end
	var wg sync.WaitGroup
	for v := range viewers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(v), 72))
			for n := range viewsPerViewer {
				if v == 0 && n == viewsPerViewer/2 {
					halfOnce.Do(func() { close(half) })
				}
				ev := stripes.Event{ID: fmt.Sprintf("view-%d-%d", v, n), Time: time.Now()}
				if n == 0 {
					first[v] = ev
				}
				tries := 1
				if rng.Float64() < retryShare {
					tries = 2
				}
				sent.Add(1)
				for range tries {
					res, err := ctr.Add(ctx, ev, 1)
					switch {
					case err != nil:
						errs.Add(1)
					case res.Applied:
						applied.Add(1)
					default:
						dups.Add(1)
					}
				}
			}
		})
	}
	<-half
	gen, err := ctr.Resize(ctx, 16)
	if err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	wg.Wait()
	// Late retries of events sent before the resize: they belong to the old generation,
	// which still remembers them, so they are recognised and not counted again.
	lateDup := 0
	for _, ev := range first {
		res, err := ctr.Add(ctx, ev, 1)
		if err != nil {
			return fmt.Errorf("late retry: %w", err)
		}
		if !res.Applied {
			lateDup++
		}
	}
	sum, err := ctr.Sum(ctx)
	if err != nil {
		return err
	}
	st := ctr.Stats()
	fmt.Printf("   %d distinct events, %d Add calls: %d counted, %d recognised as retries; resized to generation %d\n",
		sent.Load(), sent.Load()+dups.Load(), applied.Load(), dups.Load(), gen)
	for _, g := range st.StripeWrites {
		fmt.Printf("   generation %d: events per stripe %v\n", g.Gen, g.Writes)
	}
	fmt.Printf("   %d late retries of pre-resize events after the resize: %d recognised\n", len(first), lateDup)
	fmt.Printf("   Sum = %d\n", sum)
	c.Check(lateDup == len(first), "late retries across the resize were not counted again (%d of %d)", lateDup, len(first))
	c.Check(errs.Load() == 0, "every Add succeeded (%d errors)", errs.Load())
	c.Check(sum == sent.Load() && applied.Load() == sent.Load(),
		"the view count equals the distinct events: %d == %d (retries counted once, across the resize)", sum, sent.Load())
	fmt.Println()
	return nil
}
