package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/stripes"
)

// stripesFlags are the flags of every stripes subcommand.
type stripesFlags struct {
	connFlags
	prefix string
	yes    bool
}

func (sf *stripesFlags) flagSet(e *env, sub string) *flag.FlagSet {
	fs := newFlagSet(e, "stripes "+sub, &sf.connFlags)
	fs.StringVar(&sf.prefix, "prefix", stripes.DefaultPrefix, "key `prefix` of the counters (Options.Prefix)")
	if sub == "resize" {
		fs.BoolVar(&sf.yes, "yes", false, "resize without asking for confirmation")
	}
	return fs
}

// stripeStatus is one stripe of a generation as stored in Redis.
type stripeStatus struct {
	Index  int    `json:"index"`
	Key    string `json:"key"`
	Value  int64  `json:"value"`
	Sealed bool   `json:"sealed,omitempty"`
	// End is the stripe's boundary (Unix ms), set when the next generation opened.
	End int64 `json:"end,omitempty"`
	// Missing is set when the stripe key of a live generation is gone (data loss).
	Missing bool `json:"missing,omitempty"`
}

// genStatus is one generation of a counter's layout.
type genStatus struct {
	Gen     uint64 `json:"gen"`
	Stripes int    `json:"stripes"`
	// State is "open" (takes new events), "pending" (being opened by a Resize), "closed"
	// (a newer generation takes new events; retries inside the window still land here) or
	// "folded" (sealed: its total is in the base value).
	State   string         `json:"state"`
	Start   int64          `json:"start_ms,omitempty"`
	Total   int64          `json:"total"`
	Folded  int64          `json:"folded,omitempty"`
	Stripe  []stripeStatus `json:"stripe_values,omitempty"`
	SealsAt int64          `json:"seals_at_ms,omitempty"`
}

// counterStatus is what `stripes status` prints for one counter.
type counterStatus struct {
	Name        string      `json:"name"`
	LayoutKey   string      `json:"layout_key"`
	Version     uint64      `json:"version"`
	Base        int64       `json:"base"`
	Sum         int64       `json:"sum"`
	DedupWindow string      `json:"dedup_window"`
	DedupSlices int         `json:"dedup_slices"`
	DedupBits   int         `json:"dedup_bits"`
	Pruned      uint64      `json:"pruned_through_gen,omitempty"`
	Generations []genStatus `json:"generations"`
}

func runStripes(e *env, args []string) error {
	const subs = "sum | status | resize | seal"
	if len(args) == 0 {
		return usagef("stripes: give a subcommand: %s", subs)
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "sum", "status", "resize", "seal":
	default:
		return usagef("stripes: unknown subcommand %q (%s)", sub, subs)
	}
	var sf stripesFlags
	fs := sf.flagSet(e, sub)
	if err := parse(fs, args); err != nil {
		return err
	}
	pos := fs.Args()
	n := 0
	switch {
	case sub == "resize" && len(pos) != 2:
		return usagef("stripes resize NAME STRIPES")
	case sub == "resize":
		v, err := strconv.Atoi(pos[1])
		if err != nil || v < 1 || v > stripes.MaxStripes {
			return usagef("stripes resize: STRIPES must be 1..%d, got %q", stripes.MaxStripes, pos[1])
		}
		n, pos = v, pos[:1]
	case sub == "sum" && len(pos) == 0:
		return usagef("stripes sum NAME...")
	case (sub == "status" || sub == "seal") && len(pos) != 1:
		return usagef("stripes %s NAME", sub)
	}
	if strings.ContainsAny(sf.prefix, "{}") {
		return usagef("--prefix must not contain '{' or '}', got %q", sf.prefix)
	}
	for _, name := range pos {
		if name == "" || len(name) > 128 || strings.ContainsAny(name, "{}") || !utf8.ValidString(name) {
			return usagef("counter name must be 1..128 bytes of UTF-8 without '{' or '}', got %q", name)
		}
	}
	c, err := sf.client(e.ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	// Open every counter first: a name with no layout record is refused before anything
	// runs (the library would create the counter on first use). sum reads the others and
	// then reports the missing ones.
	counters := make([]*stripes.Counter, len(pos))
	layouts := make([]stripes.Layout, len(pos))
	var missing []error
	for i, name := range pos {
		counters[i], layouts[i], err = sf.open(e.ctx, c, name)
		var ue *usageError
		if sub == "sum" && errors.As(err, &ue) {
			missing = append(missing, err)
			continue
		}
		if err != nil {
			return err
		}
		defer counters[i].Close()
	}
	switch sub {
	case "sum":
		return sumCounters(e, sf.json, pos, counters, missing)
	case "status":
		st, err := status(e.ctx, counters[0], layouts[0])
		if err != nil {
			return err
		}
		return printOut(e, sf.json, st, renderStripes(st))
	case "seal":
		folded, err := counters[0].Seal(e.ctx)
		if err != nil {
			return fmt.Errorf("seal %q: %w", pos[0], err)
		}
		text := fmt.Sprintf("%s: no generation was ready to seal\n", pos[0])
		if len(folded) > 0 {
			text = fmt.Sprintf("%s: sealed and folded generation(s) %v\n", pos[0], folded)
		}
		return printOut(e, sf.json, map[string]any{"name": pos[0], "folded": nonNil(folded)}, text)
	default: // resize
		st, err := status(e.ctx, counters[0], layouts[0])
		if err != nil {
			return err
		}
		cur := st.Generations[len(st.Generations)-1]
		if cur.Stripes == n && cur.State == "open" {
			return printOut(e, sf.json, map[string]any{"name": pos[0], "gen": cur.Gen, "stripes": n, "changed": false},
				fmt.Sprintf("%s already has %d stripes (generation %d): nothing to do\n", pos[0], n, cur.Gen))
		}
		q := fmt.Sprintf("resize %q from %d to %d stripes (a new generation; the old one is sealed one dedup window, %s, later)?",
			pos[0], cur.Stripes, n, st.DedupWindow)
		if !sf.yes && !confirm(e, q) {
			return usagef("not resized (answer 'yes', or pass --yes)")
		}
		gen, err := counters[0].Resize(e.ctx, n)
		if err != nil {
			return fmt.Errorf("resize %q: %w", pos[0], err)
		}
		return printOut(e, sf.json, map[string]any{"name": pos[0], "gen": gen, "stripes": n, "changed": true},
			fmt.Sprintf("%s: generation %d has %d stripes\n", pos[0], gen, n))
	}
}

// sumCounters prints the sum of every counter that exists (a nil entry of counters is one
// that does not) and then fails with the missing ones, so that one mistyped name neither
// hides the others nor passes for a zero.
func sumCounters(e *env, asJSON bool, names []string, counters []*stripes.Counter, missing []error) error {
	sums := make(map[string]int64, len(names))
	var b strings.Builder
	for i, name := range names {
		if counters[i] == nil {
			continue
		}
		v, err := counters[i].Sum(e.ctx)
		if err != nil {
			return fmt.Errorf("sum of %q: %w", name, err)
		}
		sums[name] = v
		fmt.Fprintf(&b, "%s\t%d\n", name, v)
	}
	if err := printOut(e, asJSON, sums, b.String()); err != nil {
		return err
	}
	if len(missing) > 0 {
		msgs := make([]string, len(missing))
		for i, err := range missing {
			msgs[i] = err.Error()
		}
		return usagef("%s", strings.Join(msgs, "; "))
	}
	return nil
}

// open reads name's layout with stripes.ReadLayout and returns a Counter with the dedup
// settings recorded there (the library refuses other settings), its background loop off,
// and the layout read. A missing record is a usage error: the tool never creates a counter.
func (sf *stripesFlags) open(ctx context.Context, c redis.UniversalClient, name string) (*stripes.Counter, stripes.Layout, error) {
	lo, err := stripes.ReadLayout(ctx, c, sf.prefix, name)
	if errors.Is(err, stripes.ErrPreviousPrefix) {
		return nil, lo, usagef("no counter %q under prefix %q, the default since v0.2.0; it exists under %q, the default before: give --prefix %s",
			name, sf.prefix, stripes.PreviousDefaultPrefix, stripes.PreviousDefaultPrefix)
	}
	if errors.Is(err, stripes.ErrNoCounter) {
		return nil, lo, usagef("no counter %q under prefix %q", name, sf.prefix)
	}
	if err != nil {
		return nil, lo, fmt.Errorf("read the layout of %q: %w", name, err)
	}
	o := stripes.Options{Name: name, Prefix: sf.prefix, Stripes: 1, SealInterval: -1,
		DedupWindow: lo.DedupWindow, DedupSlices: lo.DedupSlices, DedupBits: lo.DedupBits}
	ctr, err := stripes.New(c, o)
	if err != nil {
		return nil, lo, err
	}
	return ctr, lo, nil
}

// status turns the layout open read (every generation's stripes as they are stored) into
// the tool's report, with the sum as the library computes it.
func status(ctx context.Context, ctr *stripes.Counter, lo stripes.Layout) (counterStatus, error) {
	var err error
	st := counterStatus{Name: lo.Name, LayoutKey: lo.Key, Version: lo.Version, Base: lo.Base,
		DedupWindow: lo.DedupWindow.String(), DedupSlices: lo.DedupSlices, DedupBits: lo.DedupBits,
		Pruned: lo.PrunedThrough}
	for _, g := range lo.Generations {
		gs := genStatus{Gen: g.Gen, Stripes: g.Stripes, State: string(g.State), Start: unixMs(g.Start),
			Total: g.Total, Folded: g.Folded, SealsAt: unixMs(g.SealableAt)}
		for _, v := range g.Values {
			gs.Stripe = append(gs.Stripe, stripeStatus{Index: v.Index, Key: v.Key, Value: v.Value,
				Sealed: v.Sealed, End: unixMs(v.End), Missing: v.Missing})
		}
		st.Generations = append(st.Generations, gs)
	}
	if st.Sum, err = ctr.Sum(ctx); err != nil {
		return st, fmt.Errorf("sum of %q: %w", lo.Name, err)
	}
	return st, nil
}

// unixMs is t in Unix milliseconds, 0 for the zero Time.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// renderStripes draws a counter's layout: one line per generation, one bar per stripe
// scaled to the largest stripe, so an uneven spread shows.
func renderStripes(st counterStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "counter %q  sum %d  (base %d from sealed generations)\n", st.Name, st.Sum, st.Base)
	fmt.Fprintf(&b, "layout %s version %d, dedup window %s in %d slices, %d-bit records\n",
		st.LayoutKey, st.Version, st.DedupWindow, st.DedupSlices, st.DedupBits)
	if st.Pruned > 0 {
		fmt.Fprintf(&b, "generations up to %d were sealed and pruned\n", st.Pruned)
	}
	for _, g := range st.Generations {
		fmt.Fprintf(&b, "\ngeneration %d: %s, %d stripe(s), total %d", g.Gen, g.State, g.Stripes, g.Total)
		if g.State == "folded" {
			fmt.Fprintf(&b, " (folded %d)", g.Folded)
		} else if g.SealsAt > 0 {
			fmt.Fprintf(&b, ", sealable after %s", time.UnixMilli(g.SealsAt).UTC().Format(time.RFC3339))
		}
		b.WriteString("\n")
		var top int64
		for _, s := range g.Stripe {
			top = max(top, abs64(s.Value))
		}
		for _, s := range g.Stripe {
			fill := 0
			if top > 0 {
				fill = int(float64(abs64(s.Value))/float64(top)*20 + 0.5)
			}
			note := ""
			switch {
			case s.Missing:
				note = "  MISSING (data loss?)"
			case s.Sealed:
				note = "  sealed"
			}
			fmt.Fprintf(&b, "  stripe %-4d %12d  %s%s%s\n", s.Index, s.Value,
				strings.Repeat("█", fill), strings.Repeat("·", 20-fill), note)
		}
	}
	return b.String()
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// printOut prints v as JSON with --json, else text.
func printOut(e *env, asJSON bool, v any, text string) error {
	if asJSON {
		return printJSON(e.stdout, v)
	}
	_, err := fmt.Fprint(e.stdout, text)
	return err
}
