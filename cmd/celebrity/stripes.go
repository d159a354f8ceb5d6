package main

import (
	"context"
	"encoding/json"
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

// storedLayout is the layout document stripes writes in field "doc" of a counter's layout
// hash (the package doc's "Key layout"); only the fields the tool shows are decoded.
type storedLayout struct {
	Gens []struct {
		Gen     uint64   `json:"g"`
		Stripes int      `json:"n"`
		Start   int64    `json:"start"`
		Tags    []string `json:"tags"`
		Ends    []int64  `json:"ends"`
		Pending bool     `json:"pending"`
	} `json:"gens"`
	Dedup *struct {
		WindowMs int64 `json:"window_ms"`
		Slices   int   `json:"slices"`
		Bits     int   `json:"bits"`
	} `json:"dedup"`
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
	// runs (the library would create the counter on first use).
	counters := make([]*stripes.Counter, len(pos))
	docs := make([]map[string]string, len(pos))
	for i, name := range pos {
		counters[i], docs[i], err = sf.open(e.ctx, c, name)
		if err != nil {
			return err
		}
		defer counters[i].Close()
	}
	switch sub {
	case "sum":
		sums := make(map[string]int64, len(pos))
		var b strings.Builder
		for i, name := range pos {
			v, err := counters[i].Sum(e.ctx)
			if err != nil {
				return fmt.Errorf("sum of %q: %w", name, err)
			}
			sums[name] = v
			fmt.Fprintf(&b, "%s\t%d\n", name, v)
		}
		return printOut(e, sf.json, sums, b.String())
	case "status":
		st, err := sf.status(e.ctx, c, counters[0], pos[0], docs[0])
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
		st, err := sf.status(e.ctx, c, counters[0], pos[0], docs[0])
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

// layoutKey is the key of a counter's layout record (see the stripes package doc).
func (sf *stripesFlags) layoutKey(name string) string {
	return sf.prefix + "{" + name + "}:layout"
}

// open reads name's layout record and returns a Counter with the dedup settings recorded
// there (the library refuses other settings), its background loop off. A missing record is
// a usage error: the tool never creates a counter.
func (sf *stripesFlags) open(ctx context.Context, c redis.UniversalClient, name string) (*stripes.Counter, map[string]string, error) {
	m, err := c.HGetAll(ctx, sf.layoutKey(name)).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("read the layout of %q: %w", name, err)
	}
	if len(m) == 0 {
		return nil, nil, usagef("no counter %q under prefix %q (no key %s)", name, sf.prefix, sf.layoutKey(name))
	}
	var doc storedLayout
	if err := json.Unmarshal([]byte(m["doc"]), &doc); err != nil || len(doc.Gens) == 0 {
		return nil, nil, fmt.Errorf("the layout record of %q is not one this tool reads (%q)", name, m["doc"])
	}
	o := stripes.Options{Name: name, Prefix: sf.prefix, Stripes: 1, SealInterval: -1}
	if d := doc.Dedup; d != nil {
		o.DedupWindow = time.Duration(d.WindowMs) * time.Millisecond
		o.DedupSlices, o.DedupBits = d.Slices, d.Bits
	}
	ctr, err := stripes.New(c, o)
	if err != nil {
		return nil, nil, err
	}
	return ctr, m, nil
}

// status reads every generation's stripes as they are stored, and the sum as the library
// computes it.
func (sf *stripesFlags) status(ctx context.Context, c redis.UniversalClient, ctr *stripes.Counter, name string, m map[string]string) (counterStatus, error) {
	var doc storedLayout
	_ = json.Unmarshal([]byte(m["doc"]), &doc) // checked by open
	st := counterStatus{Name: name, LayoutKey: sf.layoutKey(name)}
	st.Version, _ = strconv.ParseUint(m["ver"], 10, 64)
	st.Base, _ = strconv.ParseInt(m["base"], 10, 64)
	st.Pruned, _ = strconv.ParseUint(m["pruned"], 10, 64)
	window := stripes.DefaultDedupWindow
	st.DedupSlices, st.DedupBits = stripes.DefaultDedupSlices, stripes.DefaultDedupBits
	if d := doc.Dedup; d != nil {
		window = time.Duration(d.WindowMs) * time.Millisecond
		st.DedupSlices, st.DedupBits = d.Slices, d.Bits
	}
	st.DedupWindow = window.String()

	type read struct {
		g, i int
		cmd  *redis.SliceCmd
	}
	var reads []read
	st.Generations = make([]genStatus, len(doc.Gens))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for gi, g := range doc.Gens {
			gs := genStatus{Gen: g.Gen, Stripes: g.Stripes, Start: g.Start, State: "open"}
			if f, ok := m["folded:"+strconv.FormatUint(g.Gen, 10)]; ok {
				gs.State = "folded"
				gs.Folded, _ = strconv.ParseInt(f, 10, 64)
			} else if g.Pending {
				gs.State = "pending"
			} else if gi < len(doc.Gens)-1 && !doc.Gens[gi+1].Pending {
				gs.State = "closed"
			}
			if len(g.Ends) > 0 {
				var last int64
				for _, e := range g.Ends {
					last = max(last, e)
				}
				gs.SealsAt = last + window.Milliseconds() + window.Milliseconds()/int64(max(st.DedupSlices, 1))
			}
			st.Generations[gi] = gs
			for i := 0; i < g.Stripes && i < len(g.Tags); i++ {
				key := fmt.Sprintf("%s{%s}:%s:%d:%d", sf.prefix, g.Tags[i], name, g.Gen, i)
				st.Generations[gi].Stripe = append(st.Generations[gi].Stripe, stripeStatus{Index: i, Key: key})
				reads = append(reads, read{gi, i, p.HMGet(ctx, key, "v", "sealed", "end")})
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return st, fmt.Errorf("read the stripes of %q: %w", name, err)
	}
	for _, r := range reads {
		vals, err := r.cmd.Result()
		if err != nil {
			return st, fmt.Errorf("read stripe %d of generation %d of %q: %w", r.i, st.Generations[r.g].Gen, name, err)
		}
		s := &st.Generations[r.g].Stripe[r.i]
		if vals[0] == nil {
			s.Missing = st.Generations[r.g].State != "folded" && st.Generations[r.g].State != "pending"
			continue
		}
		s.Value, _ = strconv.ParseInt(fmt.Sprint(vals[0]), 10, 64)
		s.Sealed = vals[1] != nil
		if vals[2] != nil {
			s.End, _ = strconv.ParseInt(fmt.Sprint(vals[2]), 10, 64)
		}
		st.Generations[r.g].Total += s.Value
	}
	if st.Sum, err = ctr.Sum(ctx); err != nil {
		return st, fmt.Errorf("sum of %q: %w", name, err)
	}
	return st, nil
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
		return json.NewEncoder(e.stdout).Encode(v)
	}
	_, err := fmt.Fprint(e.stdout, text)
	return err
}
