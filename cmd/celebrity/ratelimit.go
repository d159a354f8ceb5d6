package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/celebrity-go/celebrity/ratelimit"
)

// limitStatus is what `ratelimit status` prints for one key: how much of its limit the
// current window has used, as the Redis servers count it.
type limitStatus struct {
	Key    string `json:"key"`
	Mode   string `json:"mode"`
	Window string `json:"window"`
	Rate   int64  `json:"rate"`
	Period string `json:"period"`
	// Stored reports that Redis counts something for the key under this limit in the current
	// window. The limit is part of every key, so flags that differ from the service's
	// (--rate, --period, --burst, --mode, --window, --prefix) read keys nobody writes: no
	// state, as for a mistyped or idle key.
	Stored bool `json:"stored"`
	// Used is the cells counted in the current window: admitted (Exact), granted to
	// instances as chunks, spent or not (Leased), synced by the instances (Approximate:
	// counts an instance has not synced yet are not in Redis); for GCRA, Burst minus
	// Remaining.
	Used int64 `json:"used"`
	// Remaining is what the window still admits; for GCRA, the cells admitted at once now.
	Remaining int64 `json:"remaining"`
	// ResetAfterMs is how long until the key is back at its full limit.
	ResetAfterMs int64        `json:"reset_after_ms"`
	Slots        []slotStatus `json:"slots,omitempty"`
}

// slotStatus is one budget slot of a key (Leased mode has Slots of them, on distinct masters
// of a cluster; Exact windows one).
type slotStatus struct {
	Slot   int    `json:"slot"`
	Key    string `json:"key"`
	Budget int64  `json:"budget"`
	Used   int64  `json:"used"`
}

func runRatelimit(e *env, args []string) error {
	if len(args) == 0 || args[0] != "status" {
		if len(args) == 0 {
			return usagef("ratelimit: give a subcommand: status")
		}
		return usagef("ratelimit: unknown subcommand %q (status)", args[0])
	}
	var cf connFlags
	fs := newFlagSet(e, "ratelimit status", &cf)
	prefix := fs.String("prefix", ratelimit.DefaultPrefix, "key `prefix` (Options.Prefix)")
	mode := fs.String("mode", "exact", "`mode` the service uses: exact, leased or approximate (Options.Mode)")
	window := fs.String("window", "", "`window`: gcra, sliding or fixed (Options.Window; default gcra for exact, sliding otherwise)")
	rate := fs.Int64("rate", 0, "requests per period (Options.Limit.Rate)")
	period := fs.Duration("period", 0, "the limit's `period` (Options.Limit.Period)")
	burst := fs.Int64("burst", 0, "GCRA burst (Options.Limit.Burst; default the rate)")
	subWindows := fs.Int("subwindows", 0, "sub-windows of a sliding window (Options.SubWindows; default 10)")
	slots := fs.Int("slots", 0, "budget slots in leased mode (Options.Slots; default 3)")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	keys := fs.Args()
	if len(keys) == 0 {
		return usagef("ratelimit status KEY... --rate N --period D [--mode M] [--window W]")
	}
	// The tool cannot know the service's limit; guessing one would read keys nobody writes.
	if *rate == 0 {
		return usagef("--rate is required: the service's Options.Limit.Rate (the limit is part of every key)")
	}
	if *period == 0 {
		return usagef("--period is required: the service's Options.Limit.Period (the limit is part of every key)")
	}
	o := ratelimit.Options{Limit: ratelimit.Limit{Rate: *rate, Period: *period, Burst: *burst},
		SubWindows: *subWindows, Slots: *slots, Prefix: *prefix}
	switch *mode {
	case "exact":
		o.Mode = ratelimit.Exact
	case "leased":
		o.Mode = ratelimit.Leased
	case "approximate":
		o.Mode = ratelimit.Approximate
	default:
		return usagef("--mode must be exact, leased or approximate, got %q", *mode)
	}
	switch *window {
	case "":
	case "gcra":
		o.Window = ratelimit.GCRA
	case "sliding":
		o.Window = ratelimit.Sliding
	case "fixed":
		o.Window = ratelimit.Fixed
	default:
		return usagef("--window must be gcra, sliding or fixed, got %q", *window)
	}
	// The library validates the options as the service's Limiter did (no I/O, nothing
	// written): a limit it would refuse is bad input here too.
	check, err := ratelimit.New(fakeScripter{}, o)
	if err != nil {
		return usagef("%v", err)
	}
	_ = check.Close()
	for _, k := range keys {
		if k == "" || len(k) > ratelimit.DefaultMaxKeyBytes {
			return usagef("a key must be 1..%d bytes, got %d", ratelimit.DefaultMaxKeyBytes, len(k))
		}
	}
	c, err := cf.client(e.ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	lim, err := ratelimit.New(c, o)
	if err != nil {
		return usagef("%v", err)
	}
	defer lim.Close()
	var out []limitStatus
	var b strings.Builder
	empty := 0
	for _, k := range keys {
		st, err := limitOf(e.ctx, lim, k)
		if err != nil {
			return err
		}
		out = append(out, st)
		b.WriteString(renderLimit(st))
		if !st.Stored {
			empty++
		}
	}
	if err := printOut(e, cf.json, out, b.String()); err != nil {
		return err
	}
	if empty > 0 {
		return fmt.Errorf("no state stored for %d of %d key(s) under this limit: check the key and --rate/--period/--burst/--mode/--window/--prefix against the service's options, or the key is idle", empty, len(keys))
	}
	return nil
}

// fakeScripter lets ratelimit.New validate options before the tool connects; New does no
// I/O and that Limiter is closed unused.
type fakeScripter struct{ ratelimit.Client }

// limitOf reads key's use of its limit with Limiter.Peek, which admits nothing.
func limitOf(ctx context.Context, lim *ratelimit.Limiter, key string) (limitStatus, error) {
	o := lim.Options()
	st := limitStatus{Key: key, Mode: o.Mode.String(), Window: o.Window.String(), Rate: o.Limit.Rate, Period: o.Limit.Period.String()}
	u, err := lim.Peek(ctx, key)
	if err != nil {
		return st, err
	}
	st.Used, st.Remaining = u.Used, u.Remaining
	st.ResetAfterMs = (u.ResetAfter + time.Millisecond - 1).Milliseconds()
	// Peek counts 0 for a sub-window hash or GCRA key that is not there, and a key at its
	// full limit has nothing to reset.
	st.Stored = u.Used > 0 || u.ResetAfter > 0
	for _, s := range u.Slots {
		st.Slots = append(st.Slots, slotStatus{Slot: s.Slot, Key: s.Key, Budget: s.Budget, Used: s.Used})
	}
	return st, nil
}

func renderLimit(st limitStatus) string {
	var b strings.Builder
	name := st.Key
	if !utf8.ValidString(name) {
		name = strconv.Quote(name)
	}
	if !st.Stored {
		fmt.Fprintf(&b, "%s: %s %s, %d per %s: no state stored for this key under this limit (check --rate/--period/--mode)\n",
			name, st.Mode, st.Window, st.Rate, st.Period)
		return b.String()
	}
	fmt.Fprintf(&b, "%s: %s %s, %d per %s: used %d, remaining %d, full again in %s\n", name, st.Mode, st.Window,
		st.Rate, st.Period, st.Used, st.Remaining, time.Duration(st.ResetAfterMs)*time.Millisecond)
	for _, s := range st.Slots {
		if len(st.Slots) > 1 {
			fmt.Fprintf(&b, "  slot %d: %d of %d  (%s)\n", s.Slot, s.Used, s.Budget, s.Key)
		}
	}
	return b.String()
}
