package stripes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/errs"
	"github.com/celebrity-go/celebrity/internal/slot"
)

// ErrNoCounter is returned (wrapped) by ReadLayout for a name with no layout record under
// the prefix: the counter was never used, or its record is gone. errors.Is(err,
// celebrity.ErrNotFound) also holds, as for every "not found" of the project.
var ErrNoCounter error = &noCounterError{}

// noCounterError is the type of ErrNoCounter: a kind of the project's "not found".
type noCounterError struct{}

func (*noCounterError) Error() string { return "stripes: no such counter" }

// Is reports whether target is the project's shared "not found" value.
func (*noCounterError) Is(target error) bool { return target == errs.ErrNotFound }

// GenState is the state of one generation of a counter's layout.
type GenState string

const (
	// GenOpen is the generation that takes new events.
	GenOpen GenState = "open"
	// GenPending is a generation a Resize is opening: its stripes may not exist yet.
	GenPending GenState = "pending"
	// GenClosed is an older generation: a newer one takes new events, retries of events
	// inside the dedup window still land here until it is sealed.
	GenClosed GenState = "closed"
	// GenFolded is a sealed generation whose total is in the layout's base value.
	GenFolded GenState = "folded"
)

// Layout is a counter's layout as stored in Redis, read by ReadLayout and Counter.Layout.
type Layout struct {
	// Name is the counter's name; Key is the Redis key of its layout record.
	Name, Key string
	// Version grows by one with every change of the layout document; a home record (no
	// document yet) is version 1.
	Version uint64
	// Base is the total of the generations sealed and folded so far.
	Base int64
	// DedupWindow, DedupSlices and DedupBits are the dedup settings recorded when the
	// counter was created (every process must use them); the package defaults for a layout
	// written before they were recorded.
	DedupWindow time.Duration
	DedupSlices int
	DedupBits   int
	// PrunedThrough is the newest generation sealed and dropped from the layout; 0 if none.
	PrunedThrough uint64
	// Generations are the generations still listed in the layout, oldest first.
	Generations []Generation
}

// Generation is one generation of a Layout.
type Generation struct {
	// Gen numbers generations from 1.
	Gen uint64
	// Stripes is the generation's stripe count.
	Stripes int
	// State says whether the generation takes new events, is being opened, is closed or is
	// folded.
	State GenState
	// Start is when the previous generation stopped taking new events; the zero Time for
	// the first generation.
	Start time.Time
	// Total is the sum of the stripe values read (folded generations keep their stripes
	// until they expire, so it may be 0 for them).
	Total int64
	// Folded is the total folded into the base value (GenFolded only).
	Folded int64
	// SealableAt is when Seal may seal the generation: one DedupWindow plus one slice after
	// the latest boundary of its stripes; the zero Time while a stripe has no boundary.
	SealableAt time.Time
	// Values are the generation's stripes, by index.
	Values []StripeValue
}

// StripeValue is one stripe of a Generation as stored in Redis.
type StripeValue struct {
	// Index is the stripe's index in its generation.
	Index int
	// Key is the stripe's Redis key, for an operator looking at the servers: the layout
	// key itself for the stripe of a counter created with one stripe, until that generation
	// is dropped (a home record, see the package doc).
	Key string
	// Value is the stripe's value (0 if the key is missing).
	Value int64
	// Sealed is set once Seal froze the stripe.
	Sealed bool
	// End is the stripe's boundary, set when the next generation opened; the zero Time
	// before.
	End time.Time
	// Missing is set when the key of a stripe of a generation that is neither pending nor
	// folded is gone: its events are lost.
	Missing bool
}

// Layout reads c's layout and the value of every stripe, without writing anything and
// without changing c's cached layout. It is ReadLayout with c's client, prefix and name.
func (c *Counter) Layout(ctx context.Context) (Layout, error) {
	return ReadLayout(ctx, c.client, c.opts.Prefix, c.opts.Name)
}

// ReadLayout reads the layout of counter name under prefix ("" means DefaultPrefix) and the
// value of every stripe of every generation it lists, in two round trips and without writing
// anything. It needs no Counter, so it works whatever dedup settings the counter was created
// with (they are in the result). The stripes are read at slightly different instants, like
// Sum's. A name without a layout record gives an error wrapping ErrNoCounter (and, under
// DefaultPrefix, ErrPreviousPrefix if the name has one under PreviousDefaultPrefix); a bad
// name or prefix one wrapping ErrInvalid; a record that cannot be decoded one wrapping
// ErrLayout.
func ReadLayout(ctx context.Context, client Client, prefix, name string) (Layout, error) {
	if client == nil {
		return Layout{}, invalidf("client must not be nil")
	}
	if err := checkName("counter name", name); err != nil {
		return Layout{}, err
	}
	if slot.HasBraces(prefix) {
		return Layout{}, invalidf("prefix must not contain '{' or '}', got %q", prefix)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	ks := keys{prefix: prefix, name: name}
	m, err := bound.Do(ctx, func() (map[string]string, error) { return client.HGetAll(ctx, ks.layout()).Result() })
	if err != nil {
		return Layout{}, fmt.Errorf("stripes: read the layout of %q: %w", name, err)
	}
	if len(m) == 0 {
		err := fmt.Errorf("%w: %q under prefix %q (no key %s)", ErrNoCounter, name, prefix, ks.layout())
		if prefix == DefaultPrefix {
			if prev := checkPrevious(ctx, client, name); prev != nil {
				err = errors.Join(err, prev)
			}
		}
		return Layout{}, err
	}
	lo, err := decodeLayout(ks, m)
	if err != nil {
		return Layout{}, err
	}
	return lo, readStripeValues(ctx, client, &lo)
}

// decodeLayout builds a Layout from the fields m of the layout hash of ks, without I/O:
// every generation with its state, its sealable time and its stripes' keys, their values
// not read yet.
func decodeLayout(ks keys, m map[string]string) (Layout, error) {
	name := ks.name
	var doc layoutDoc
	var err error
	lo := Layout{Name: name, Key: ks.layout(), DedupWindow: DefaultDedupWindow,
		DedupSlices: DefaultDedupSlices, DedupBits: DefaultDedupBits}
	if m["ver"] == homeVer {
		if doc, err = parseHome(m); err != nil {
			return Layout{}, err
		}
		lo.Version = 1
	} else {
		if err := json.Unmarshal([]byte(m["doc"]), &doc); err != nil {
			return Layout{}, fmt.Errorf("%w: layout document of %q: %v", ErrLayout, name, err)
		}
		if err := doc.check(true); err != nil {
			return Layout{}, err
		}
		if lo.Version, err = strconv.ParseUint(m["ver"], 10, 64); err != nil {
			return Layout{}, fmt.Errorf("%w: layout version %q of %q", ErrLayout, m["ver"], name)
		}
	}
	if b, ok := m["base"]; ok {
		if lo.Base, err = strconv.ParseInt(b, 10, 64); err != nil {
			return Layout{}, fmt.Errorf("%w: layout base %q of %q", ErrLayout, b, name)
		}
	}
	lo.PrunedThrough, _ = strconv.ParseUint(m["pruned"], 10, 64)
	if d := doc.Dedup; d != nil {
		lo.DedupWindow = time.Duration(d.WindowMs) * time.Millisecond
		lo.DedupSlices, lo.DedupBits = d.Slices, d.Bits
	}
	lo.Generations = make([]Generation, len(doc.Gens))
	for gi := range doc.Gens {
		lo.Generations[gi] = describeGen(ks, doc.Gens, gi, m, lo.DedupWindow, lo.DedupSlices)
	}
	return lo, nil
}

// describeGen describes generation gens[gi]: its state (folded by the field m records,
// pending, closed once a later generation is open, else open), when it may be sealed (one
// window plus one slice after its latest stripe boundary) and its stripes' keys.
func describeGen(ks keys, gens []genDoc, gi int, m map[string]string, window time.Duration, slices int) Generation {
	g := gens[gi]
	gs := Generation{Gen: g.Gen, Stripes: g.Stripes, State: GenOpen, Start: unixMs(g.Start)}
	if f, ok := m["folded:"+strconv.FormatUint(g.Gen, 10)]; ok {
		gs.State = GenFolded
		gs.Folded, _ = strconv.ParseInt(f, 10, 64)
	} else if g.Pending {
		gs.State = GenPending
	} else if gi < len(gens)-1 && !gens[gi+1].Pending {
		gs.State = GenClosed
	}
	if len(g.Ends) > 0 {
		var last int64
		for _, e := range g.Ends {
			last = max(last, e)
		}
		w := window.Milliseconds()
		gs.SealableAt = unixMs(last + w + w/int64(max(slices, 1)))
	}
	for i := 0; i < g.Stripes && (g.Home || i < len(g.Tags)); i++ {
		gs.Values = append(gs.Values, StripeValue{Index: i, Key: ks.of(&g, i)})
	}
	return gs
}

// readStripeValues reads the value, seal and boundary of every stripe lo lists, in one
// pipeline, and adds each generation's values up.
func readStripeValues(ctx context.Context, client Client, lo *Layout) error {
	var cmds []*redis.SliceCmd
	_, err := bound.Pipelined(ctx, client, func(p redis.Pipeliner) error {
		for _, g := range lo.Generations {
			for _, s := range g.Values {
				cmds = append(cmds, p.HMGet(ctx, s.Key, "v", "sealed", "end"))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("stripes: read the stripes of %q: %w", lo.Name, err)
	}
	for gi := range lo.Generations {
		g := &lo.Generations[gi]
		for i := range g.Values {
			vals, err := cmds[0].Result()
			cmds = cmds[1:]
			if err != nil {
				return fmt.Errorf("stripes: read stripe %d of generation %d of %q: %w", i, g.Gen, lo.Name, err)
			}
			fillStripe(g, &g.Values[i], vals)
		}
	}
	return nil
}

// fillStripe records in s, a stripe of g, its HMGET v sealed end reply vals.
func fillStripe(g *Generation, s *StripeValue, vals []any) {
	if vals[0] == nil {
		s.Missing = g.State != GenFolded && g.State != GenPending
		return
	}
	s.Value, _ = strconv.ParseInt(fmt.Sprint(vals[0]), 10, 64)
	s.Sealed = vals[1] != nil
	if vals[2] != nil {
		e, _ := strconv.ParseInt(fmt.Sprint(vals[2]), 10, 64)
		s.End = unixMs(e)
	}
	g.Total += s.Value
}

// unixMs converts Unix milliseconds to a UTC Time; 0 (not set) is the zero Time.
func unixMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
