package stripes

import (
	"context"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"math/big"

	"github.com/redis/go-redis/v9"
)

// Sum returns the counter's value: the base value of sealed generations plus every stripe
// of every live generation, read in one pipeline after a fresh read of the layout record.
//
// Sum is not a snapshot: stripes are read at slightly different instants, so it may include
// one concurrent event and miss another. For a counter that only ever gets positive deltas,
// the sums one caller reads one after the other never decrease (a fold moves a sealed, frozen
// total from stripes to base in one step, and a generation is read from its stripes exactly
// when the layout read says it is not folded). With negative deltas, a concurrent reader may
// see any partial combination of in-flight events, including values the counter never held
// at any single instant (an increment in one stripe missed, a decrement in another seen).
// It returns ErrVanished (an ErrLayout) if a stripe of an open generation is missing, or one
// of a pending generation once the generation before it is closed (see lostPending).
func (c *Counter) Sum(ctx context.Context) (int64, error) {
	l, err := c.ensureLayout(ctx)
	if err != nil {
		return 0, err
	}
	reads, err := c.readStripes(ctx, l)
	if err != nil {
		return 0, err
	}
	total, err := addUp(l.base, reads)
	if err != nil {
		return 0, err
	}
	if err := c.checkPending(ctx, l, reads); err != nil {
		return 0, err
	}
	c.stats.sums.Add(1)
	return total, nil
}

// stripeRead is one stripe value read by Sum.
type stripeRead struct {
	g   *genDoc
	i   int
	cmd *redis.StringCmd
}

// readStripes reads the value of every stripe of every generation of l that is not
// folded, in one pipeline.
func (c *Counter) readStripes(ctx context.Context, l *layout) ([]stripeRead, error) {
	var reads []stripeRead
	_, err := bound.Pipelined(ctx, c.client, func(p redis.Pipeliner) error {
		for k := range l.doc.Gens {
			g := &l.doc.Gens[k]
			if l.isFolded(g.Gen) {
				continue
			}
			for i := range g.Stripes {
				reads = append(reads, stripeRead{g, i, p.HGet(ctx, c.keys.of(g, i), "v")})
			}
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("stripes: sum: %w", err)
	}
	return reads, nil
}

// checkPending returns ErrVanished if a stripe of the pending generation was read missing
// and lost, not yet created (see lostPending).
func (c *Counter) checkPending(ctx context.Context, l *layout, reads []stripeRead) error {
	gens := l.doc.Gens
	for _, r := range reads {
		if !r.g.Pending || r.cmd.Err() != redis.Nil {
			continue
		}
		lost, err := c.lostPending(ctx, &gens[len(gens)-2], &gens[len(gens)-1])
		if err == nil && lost {
			err = vanishedf("a stripe of pending generation %d is missing after generation %d was closed", r.g.Gen, r.g.Gen-1)
		}
		return err
	}
	return nil
}

// addUp adds the stripe values read to base. A missing stripe of a pending generation
// counts 0 (its stripes are being created); one of any other live generation is
// ErrVanished.
func addUp(base int64, reads []stripeRead) (int64, error) {
	total := big.NewInt(base)
	for _, r := range reads {
		v, err := r.cmd.Int64()
		if err == redis.Nil && r.g.Pending {
			continue // the pending generation's stripes are being created
		}
		if err == redis.Nil {
			return 0, vanishedf("stripe %d of live generation %d is missing", r.i, r.g.Gen)
		}
		if err != nil {
			return 0, fmt.Errorf("stripes: sum: stripe %d of generation %d: %w", r.i, r.g.Gen, err)
		}
		total.Add(total, big.NewInt(v))
	}
	if !total.IsInt64() {
		return 0, fmt.Errorf("stripes: sum %s overflows int64", total)
	}
	return total.Int64(), nil
}
