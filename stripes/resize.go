package stripes

import (
	"context"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/script"
	"github.com/celebrity-go/celebrity/internal/slot"
)

// Resize makes n the stripe count of new events and returns the generation that has it.
// If the newest generation already has n stripes, Resize changes nothing and returns it, so
// a retried Resize is harmless. Otherwise it opens a new generation in four idempotent
// steps, each of which a crashed Resize leaves for the next Resize (or Seal) to finish:
//
//  1. compare-and-set the layout record with the new generation marked pending, its stripe
//     tags chosen now (spread over the cluster's masters) and a proposed boundary B, the
//     current time;
//  2. create the new stripes (value 0);
//  3. close each stripe of the previous generation: its boundary becomes max(B, the latest
//     event time it accepted + 1), so no event ever changes generation between attempts;
//  4. compare-and-set the layout with those boundaries and the new generation open.
//
// Events with a time before their stripe's boundary keep going to the previous generation
// until it is sealed, one DedupWindow (plus one slice) after the boundaries.
func (c *Counter) Resize(ctx context.Context, n int) (uint64, error) {
	if n < 1 || n > MaxStripes {
		return 0, invalidf("stripe count must be 1..%d, got %d", MaxStripes, n)
	}
	for range casAttempts {
		l, err := c.ensureLayout(ctx)
		if err != nil {
			return 0, err
		}
		last := l.doc.Gens[len(l.doc.Gens)-1]
		if last.Pending {
			if err := c.finishResize(ctx, l); err != nil {
				return 0, err
			}
			continue
		}
		if last.Stripes == n {
			return last.Gen, nil
		}
		g := genDoc{Gen: last.Gen + 1, Stripes: n, Start: c.opts.Clock().UnixMilli(), Pending: true}
		if g.Tags, err = c.place(ctx, g.Gen, n); err != nil {
			return 0, err
		}
		doc := l.doc
		doc.Gens = append(slices.Clone(l.doc.Gens), g)
		if _, err := c.casLayout(ctx, l.ver, doc); err != nil {
			return 0, err
		}
		// Whether this CAS won or another writer changed the layout, the next round reads
		// it again and finishes whatever is pending.
	}
	return 0, fmt.Errorf("%w: resizing %q to %d stripes", ErrConflict, c.opts.Name, n)
}

// finishResize runs steps 2..4 of Resize for the pending newest generation of l.
func (c *Counter) finishResize(ctx context.Context, l *layout) error {
	gens := l.doc.Gens
	next := gens[len(gens)-1]
	prev := gens[len(gens)-2]
	if ok, err := c.mayCreate(ctx, l, &prev, &next); !ok {
		return err
	}
	if err := c.createStripes(ctx, &next); err != nil {
		return err
	}
	ends := make([]int64, prev.Stripes)
	cmds, err := c.pipeline(ctx, closeScript, prev.Stripes, func(i int) (string, []any) {
		return c.keys.of(&prev, i), []any{prev.Gen, next.Start}
	})
	if err != nil {
		return fmt.Errorf("stripes: close generation %d: %w", prev.Gen, err)
	}
	for i, cmd := range cmds {
		e, err := cmd.Int64()
		if err != nil {
			return fmt.Errorf("stripes: close generation %d stripe %d: %w", prev.Gen, i, err)
		}
		ends[i] = e
	}
	doc := l.doc
	doc.Gens = slices.Clone(gens)
	doc.Gens[len(gens)-2].Ends = ends
	doc.Gens[len(gens)-1].Pending = false
	_, err = c.casLayout(ctx, l.ver, doc)
	return err
}

// mayCreate reports whether finishResize may create (again) the stripes of next, the
// pending generation of l, which follows prev. It may not when a stripe of prev is missing:
// prev's stripes live until prev is sealed, which needs next open, so l is out of date (a
// finisher paused for long: creating would bring back expired stripes of a sealed
// generation, with no TTL, which a writer holding a layout as old would count in and Sum
// never read), and the caller reads the layout again; or prev was lost (ErrVanished). Nor
// when a stripe of next was lost (see lostPending).
func (c *Counter) mayCreate(ctx context.Context, l *layout, prev, next *genDoc) (bool, error) {
	missing, err := c.someStripe(ctx, prev, "g", false)
	if err != nil {
		return false, err
	}
	if missing {
		cur, err := c.loadLayout(ctx)
		if err != nil || cur != nil && cur.ver != l.ver {
			return false, err
		}
		return false, vanishedf("a stripe of generation %d is missing while generation %d is pending", prev.Gen, next.Gen)
	}
	lost, err := c.lostPending(ctx, prev, next)
	if err == nil && lost {
		err = vanishedf("a stripe of pending generation %d is missing after generation %d was closed", next.Gen, prev.Gen)
	}
	return err == nil && !lost, err
}

// lostPending reports whether a stripe of the pending generation next is missing although
// a stripe of prev, the generation it follows, is closed. Every resizer creates all the
// stripes of the new generation before it closes any stripe of the old one, and events
// reach the new stripes from the first close on: a new stripe missing after a close was
// lost with the events it held, and creating it again would count their retries a second
// time. The two reads are made one after the other, so a close seen by the first proves
// the creation finished before the second.
func (c *Counter) lostPending(ctx context.Context, prev, next *genDoc) (bool, error) {
	closed, err := c.someStripe(ctx, prev, "end", true)
	if err != nil || !closed {
		return false, err
	}
	return c.someStripe(ctx, next, "g", false)
}

// someStripe reports whether some stripe of g has field set (set true) or lacks it, the
// stripe itself included (set false).
func (c *Counter) someStripe(ctx context.Context, g *genDoc, field string, set bool) (bool, error) {
	cmds := make([]*redis.StringCmd, g.Stripes)
	_, err := bound.Pipelined(ctx, c.client, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.HGet(ctx, c.keys.of(g, i), field)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return false, fmt.Errorf("stripes: read generation %d: %w", g.Gen, err)
	}
	for i, cmd := range cmds {
		switch err := cmd.Err(); {
		case err != nil && err != redis.Nil:
			return false, fmt.Errorf("stripes: read generation %d stripe %d: %w", g.Gen, i, err)
		case (err == nil) == set:
			return true, nil
		}
	}
	return false, nil
}

// createStripes creates every stripe of g (idempotent).
func (c *Counter) createStripes(ctx context.Context, g *genDoc) error {
	_, err := c.pipeline(ctx, createScript, g.Stripes, func(i int) (string, []any) {
		return c.keys.of(g, i), []any{g.Gen, g.Stripes, i}
	})
	if err != nil {
		return fmt.Errorf("stripes: create generation %d: %w", g.Gen, err)
	}
	return nil
}

// pipeline runs s once per stripe (n calls, one key each) in one pipeline (see runAll) and
// returns one command per stripe, with the first failed call's error. Every script it runs
// is idempotent.
func (c *Counter) pipeline(ctx context.Context, s *script.Script, n int, call func(i int) (string, []any)) ([]*redis.Cmd, error) {
	calls := make([]script.Call, n)
	for i := range calls {
		key, args := call(i)
		calls[i] = script.Call{Script: s, Keys: []string{key}, Args: args}
	}
	cmds := runAll(ctx, c.client, calls)
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// place chooses the hash tags of a new generation's n stripes. On a cluster, stripe i goes
// to master (i+offset) % masters, so the counts per master differ by at most one (16 stripes
// on 3 masters: 6/5/5), and to a distinct slot of that master, spread over its slots. The tags
// are recorded in the layout and never move, even if the topology changes later. On a
// standalone server any distinct tags do.
func (c *Counter) place(ctx context.Context, gen uint64, n int) ([]string, error) {
	tags := make([]string, n)
	cc, ok := c.client.(*redis.ClusterClient)
	if !ok {
		for i := range tags {
			tags[i] = strconv.Itoa(i)
		}
		return tags, nil
	}
	m, err := slot.Load(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("stripes: place generation %d: %w", gen, err)
	}
	return placeOn(m, c.opts.Name, gen, n)
}

// placeOn is place over a loaded slot map: a pure function of the map, the name, the
// generation and n.
func placeOn(m *slot.Map, name string, gen uint64, n int) ([]string, error) {
	masters := m.Masters()
	if len(masters) == 0 {
		return nil, fmt.Errorf("stripes: place generation %d: the cluster has no master", gen)
	}
	seed := hashing.Sum64(name + ":" + strconv.FormatUint(gen, 10))
	per := make([][]int, len(masters)) // stripes of each master
	for i := 0; i < n; i++ {
		k := (i + int(seed%uint64(len(masters)))) % len(masters)
		per[k] = append(per[k], i)
	}
	tags := make([]string, n)
	for k, stripes := range per {
		if len(stripes) == 0 {
			continue
		}
		owned := m.Slots(masters[k])
		if len(owned) < len(stripes) {
			return nil, fmt.Errorf("stripes: place generation %d: master %s owns %d slots for %d stripes", gen, masters[k], len(owned), len(stripes))
		}
		step := len(owned) / len(stripes)
		off := int(seed>>32) % step
		for j, i := range stripes {
			tags[i] = slot.TagFor(owned[j*step+off])
		}
	}
	return tags, nil
}
