package stripes

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Seal seals every old generation whose dedup window has passed: one DedupWindow plus one
// slice after the latest of its stripes' boundaries. For each such generation it
//
//  1. marks each stripe sealed (seal.lua), which freezes it (later events in it get
//     ErrTooOld) and returns its final value;
//  2. folds the sum of those values into the layout's base value under the generation's
//     number as seal ID (fold.lua), which happens at most once per generation;
//  3. lets the sealed stripes expire after one more DedupWindow.
//
// A crash between steps leaves the generation half sealed; the next Seal repeats step 1,
// which returns the same frozen values, and folds them once, or does step 3. Seal also finishes a Resize
// that crashed half way. It returns the generations it folded. The background loop (see
// Options.SealInterval) calls it periodically.
func (c *Counter) Seal(ctx context.Context) ([]uint64, error) {
	l, err := c.loadLayout(ctx)
	if err != nil || l == nil {
		return nil, err
	}
	if l.doc.Gens[len(l.doc.Gens)-1].Pending {
		if err := c.finishResize(ctx, l); err != nil {
			return nil, err
		}
		if l, err = c.ensureLayout(ctx); err != nil {
			return nil, err
		}
	}
	grace := c.opts.DedupWindow + time.Duration(c.opts.sliceMs())*time.Millisecond
	now := c.opts.Clock().UnixMilli()
	var sealed []uint64
	for _, st := range planSeal(l, now, grace.Milliseconds()) {
		if st.expireOnly {
			if err := c.expireSealed(ctx, st.g); err != nil {
				return sealed, err
			}
			continue
		}
		folded, err := c.sealGen(ctx, st.g)
		if err != nil {
			return sealed, err
		}
		if folded {
			sealed = append(sealed, st.g.Gen)
		}
	}
	if len(sealed) > 0 {
		if l, err = c.loadLayout(ctx); err != nil {
			return sealed, err
		}
	}
	return sealed, c.prune(ctx, l, now, grace.Milliseconds())
}

// prune drops from the layout document the oldest generations that nothing can need any
// more: folded, and their sealed stripes given a TTL of one window more than grace ago, so
// that the stripes are gone and no retry of their events can be inside its window. The
// document keeps the latest boundary of what it dropped (Floor), so that late events by
// time still get ErrTooOld rather than land in a newer generation.
func (c *Counter) prune(ctx context.Context, l *layout, now, grace int64) error {
	k := 0
	for k < len(l.doc.Gens)-1 {
		g := l.doc.Gens[k]
		at := l.expiring[g.Gen]
		if !l.isFolded(g.Gen) || at == 0 || now < at+c.opts.DedupWindow.Milliseconds()+grace {
			break
		}
		k++
	}
	if k == 0 {
		return nil
	}
	doc := l.doc
	for _, g := range doc.Gens[:k] {
		doc.Floor = max(doc.Floor, slices.Max(g.Ends))
	}
	doc.Gens = slices.Clone(doc.Gens[k:])
	raw, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("stripes: encode layout: %w", err)
	}
	first := strconv.FormatUint(doc.Gens[0].Gen, 10)
	if err := pruneScript.Run(ctx, c.client, []string{c.keys.layout()}, strconv.FormatUint(l.ver, 10), string(raw), first).Err(); err != nil {
		return fmt.Errorf("stripes: prune layout: %w", err)
	}
	return nil
}

// sealStep is one generation a Seal round works on.
type sealStep struct {
	g genDoc
	// expireOnly is set for a generation already folded whose stripes were never given
	// their TTL (a round stopped between the fold and the TTL): only step 3 is left.
	expireOnly bool
}

// planSeal lists, oldest first, what a Seal round at now (Unix ms) does with the
// generations of l: finish the folded ones left without a TTL, and seal the closed ones
// whose latest stripe boundary is at least grace ms old.
func planSeal(l *layout, now, grace int64) []sealStep {
	var steps []sealStep
	for _, g := range l.doc.Gens {
		switch {
		case l.isFolded(g.Gen) && l.expiring[g.Gen] == 0:
			steps = append(steps, sealStep{g: g, expireOnly: true})
		case g.Ends == nil || l.isFolded(g.Gen) || now < slices.Max(g.Ends)+grace:
		default:
			steps = append(steps, sealStep{g: g})
		}
	}
	return steps
}

// sealGen runs the three steps of Seal for one closed generation. It reports whether this
// call did the fold.
func (c *Counter) sealGen(ctx context.Context, g genDoc) (bool, error) {
	cmds, err := c.pipeline(ctx, sealScript, g.Stripes, func(i int) (string, []any) {
		return c.keys.of(&g, i), []any{g.Gen}
	})
	if err != nil {
		return false, fmt.Errorf("stripes: seal generation %d: %w", g.Gen, err)
	}
	total, err := sealedTotal(g, cmds)
	if err != nil {
		return false, err
	}
	reply, err := foldScript.Run(ctx, c.client, []string{c.keys.layout()}, g.Gen, total.String()).Slice()
	if err != nil {
		return false, fmt.Errorf("stripes: fold generation %d: %w", g.Gen, err)
	}
	if len(reply) != 2 {
		return false, fmt.Errorf("%w: fold.lua replied %v", ErrLayout, reply)
	}
	if n, _ := reply[0].(int64); n == 2 {
		return false, nil // folded and pruned while this round ran
	}
	if prev, _ := reply[1].(string); prev != total.String() {
		return false, fmt.Errorf("%w: generation %d was folded with total %v, stripes now sum to %s", ErrLayout, g.Gen, reply[1], total)
	}
	if err := c.expireSealed(ctx, g); err != nil {
		return false, err
	}
	n, _ := reply[0].(int64)
	return n == 1, nil
}

// sealedTotal adds up the final values seal.lua returned for the stripes of g; the total
// must fit an int64.
func sealedTotal(g genDoc, cmds []*redis.Cmd) (*big.Int, error) {
	total := new(big.Int)
	for i, cmd := range cmds {
		v, err := cmd.Text()
		if err != nil {
			return nil, fmt.Errorf("stripes: seal generation %d stripe %d: %w", g.Gen, i, err)
		}
		x, ok := new(big.Int).SetString(v, 10)
		if !ok {
			return nil, fmt.Errorf("%w: generation %d stripe %d holds %q", ErrLayout, g.Gen, i, v)
		}
		total.Add(total, x)
	}
	if !total.IsInt64() {
		return nil, fmt.Errorf("%w: generation %d total %s overflows int64", ErrLayout, g.Gen, total)
	}
	return total, nil
}

// expireSealed gives the sealed stripes of folded generation g a TTL of one more window, so
// that late retries still find them sealed for a while, then marks g "expiring:<g>" in the
// layout. Their dedup sets expire on their own. A home stripe lives in the layout hash: it
// stays, sealed, until prune drops its fields with the generation.
func (c *Counter) expireSealed(ctx context.Context, g genDoc) error {
	var err error
	if !g.Home {
		_, err = bound.Pipelined(ctx, c.client, func(p redis.Pipeliner) error {
			for i := range g.Stripes {
				p.PExpire(ctx, c.keys.of(&g, i), c.opts.DedupWindow)
			}
			return nil
		})
	}
	var marked int64
	if err == nil {
		marked, err = expiringScript.Run(ctx, c.client, []string{c.keys.layout()}, g.Gen, c.opts.Clock().UnixMilli()).Int64()
	}
	if err != nil {
		return fmt.Errorf("stripes: expire generation %d: %w", g.Gen, err)
	}
	if marked == 0 {
		return vanishedf("layout record %s is gone (sealing generation %d)", c.keys.layout(), g.Gen)
	}
	return nil
}

// sealLoop calls Seal every Options.SealInterval until Close.
func (c *Counter) sealLoop() {
	defer c.done.Done()
	t := time.NewTicker(c.opts.SealInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.OpTimeout)
		if _, err := c.Seal(ctx); err != nil {
			c.opts.Logger.Warn("stripes: seal round failed", "counter", c.opts.Name, "err", err)
		}
		cancel()
	}
}
