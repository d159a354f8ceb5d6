package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/examples/internal/redisenv"
)

const (
	seatCount = 100
	buyers    = 300
	lostBuyer = "buyer-lost-reply"
)

// seats sells the course's 100 seats to 300 concurrent buyers with an escrow limit; one
// buyer's reply is lost and the buyer retries. It returns each buyer's seat.
func seats(ctx context.Context, t *redisenv.Target, run string, c *checker) (map[string]int, error) {
	fmt.Printf("2. seats: %d buyers race for %d seats; %s's reply is lost and it retries\n", buyers, seatCount, lostBuyer)
	opts := escrow.CentralOptions{
		Name: run + "-course72-seats", Capacity: seatCount, Prefix: "celebrity-example:escrow:",
		AllowEviction: t.Kind == redisenv.Embedded,
		// The example's servers may run without AOF; a production limiter keeps the default
		// refusal (ErrWeakDurability).
		AllowWeakDurability: true,
	}
	lim, err := escrow.NewCentral(t.Client, opts)
	if err != nil {
		return nil, err
	}
	if err := lim.Init(ctx); err != nil {
		return nil, err
	}
	inj := faults.New()
	fc := redisenv.Faulty(t.Client, inj.Dialer(nil))
	defer fc.Close()
	lossy, err := escrow.NewCentral(fc, opts)
	if err != nil {
		return nil, err
	}

	var mu sync.Mutex
	sold := map[string]int{}
	bySeat := map[int][]string{}
	var refused, errs int
	buy := func(buyer string) {
		g, err := lim.Acquire(ctx, buyer)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case errors.Is(err, escrow.ErrExhausted):
			refused++
		case err != nil:
			errs++
		default:
			sold[buyer] = g.Permit
			bySeat[g.Permit] = append(bySeat[g.Permit], buyer)
		}
	}
	// The first buyer is served before the rush (which also puts the purchase script in the
	// server's script cache, so that the lost reply below is the reply of a purchase that
	// ran). Then the lost buyer: its purchase runs on the server, the reply never arrives.
	buy("buyer-000")
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: lostBuyer}, 1)
	_, lostErr := lossy.Acquire(ctx, lostBuyer)

	var wg sync.WaitGroup
	for i := 1; i < buyers; i++ {
		wg.Go(func() { buy(fmt.Sprintf("buyer-%03d", i)) })
	}
	wg.Wait()
	retry, err := lim.Acquire(ctx, lostBuyer)
	if err != nil {
		return nil, fmt.Errorf("the lost buyer's retry: %w", err)
	}
	sold[lostBuyer] = retry.Permit
	bySeat[retry.Permit] = append(bySeat[retry.Permit], lostBuyer)
	rep, err := lim.Audit(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Printf("   first try of %s: %v\n", lostBuyer, lostErr)
	fmt.Printf("   retry: seat %d, replayed=%v\n", retry.Permit, retry.Replayed)
	fmt.Printf("   %d seats sold, %d buyers refused (ErrExhausted); audit: %s\n", len(sold), refused, rep.String())

	double := 0
	for _, bs := range bySeat {
		if len(bs) > 1 {
			double++
		}
	}
	c.Check(errs == 0, "no buyer saw an error other than ErrExhausted (%d)", errs)
	c.Check(len(sold) == seatCount && refused == buyers-(seatCount-1) && double == 0,
		"exactly %d seats sold, each to one buyer (%d sold, %d refused, %d seats sold twice)",
		seatCount, len(sold), refused, double)
	c.Check(lostErr != nil && retry.Replayed, "the buyer whose reply was lost got its seat back, not a second one")
	c.Check(rep.Clean(), "the escrow audit is clean")
	fmt.Println()
	return sold, nil
}
