package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/slot"
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
	// Used is the cells counted in the current window: admitted (Exact), granted to
	// instances as chunks, spent or not (Leased), synced by the instances (Approximate:
	// counts an instance has not synced yet are not in Redis).
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

// windowScript reads the counts of the k sub-windows ending at the server's current one, as
// take.lua and sync.lua sum them. It writes nothing.
//
// KEYS[1] the base of a slot ("<prefix>{<tag>}:<m>:<key>[:<slot>]"); the sub-window hashes
// "<base>:<index>" share its hash tag. ARGV[1] sub-window ms, ARGV[2] k.
// Reply: {now_ms, n_1, ..., n_k}, oldest sub-window first.
var windowScript = redis.NewScript(`
local sub, k = tonumber(ARGV[1]), tonumber(ARGV[2])
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local cur = math.floor(now / sub)
local out = {now}
for i = 1, k do
  out[i + 1] = tonumber(redis.call('HGET', KEYS[1] .. ':' .. string.format('%.0f', cur - k + i), 'n') or '0')
end
return out`)

// gcraScript reads a GCRA key's theoretical arrival time with the server's clock (µs). It
// writes nothing. Reply: {now_us, tat or false}.
var gcraScript = redis.NewScript(`
local tm = redis.call('TIME')
return {tonumber(tm[1]) * 1000000 + tonumber(tm[2]), redis.call('GET', KEYS[1])}`)

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
	lim, err := ratelimit.New(fakeScripter{}, o)
	if err != nil {
		return usagef("%v", err)
	}
	_ = lim.Close()
	o = fillRatelimitDefaults(o)
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
	var out []limitStatus
	var b strings.Builder
	for _, k := range keys {
		st, err := limitOf(e.ctx, c, o, k)
		if err != nil {
			return err
		}
		out = append(out, st)
		b.WriteString(renderLimit(st))
	}
	return printOut(e, cf.json, out, b.String())
}

// fakeScripter lets ratelimit.New validate options; New does no I/O and the Limiter is
// closed unused.
type fakeScripter struct{ ratelimit.Client }

// fillRatelimitDefaults applies the defaults the ratelimit package documents for the fields
// that decide the key layout and the budget.
func fillRatelimitDefaults(o ratelimit.Options) ratelimit.Options {
	if o.Window == ratelimit.WindowDefault {
		o.Window = ratelimit.Sliding
		if o.Mode == ratelimit.Exact {
			o.Window = ratelimit.GCRA
		}
	}
	switch {
	case o.Window != ratelimit.Sliding:
		o.SubWindows = 1
	case o.SubWindows == 0:
		o.SubWindows = ratelimit.DefaultSubWindows
	}
	if o.Limit.Burst == 0 {
		o.Limit.Burst = o.Limit.Rate
	}
	switch {
	case o.Mode != ratelimit.Leased:
		o.Slots = 1
	case o.Slots == 0:
		o.Slots = ratelimit.DefaultSlots
	}
	return o
}

// tagIn is the ratelimit package's hash tag of slot j of n for key (its doc's "Key layout"):
// a tag whose hash slot lies in the j-th of n equal ranges, offset by xxhash64(key).
func tagIn(key string, j, n int) string {
	lo := j * slot.Count / n
	hi := (j + 1) * slot.Count / n
	return slot.TagFor(uint16(lo + int(hashing.Sum64(key)%uint64(hi-lo))))
}

func limitOf(ctx context.Context, c redis.UniversalClient, o ratelimit.Options, key string) (limitStatus, error) {
	st := limitStatus{Key: key, Mode: o.Mode.String(), Window: o.Window.String(), Rate: o.Limit.Rate, Period: o.Limit.Period.String()}
	if o.Window == ratelimit.GCRA {
		k := o.Prefix + "{" + tagIn(key, 0, 1) + "}:g:" + key
		res, err := gcraScript.Run(ctx, c, []string{k}).Slice()
		if err != nil {
			return st, fmt.Errorf("read %q: %w", k, err)
		}
		now, _ := res[0].(int64)
		per := float64(o.Limit.Period.Microseconds()) / float64(o.Limit.Rate)
		st.Remaining = o.Limit.Burst
		if s, ok := res[1].(string); ok {
			tat, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return st, fmt.Errorf("%q holds %q, not a GCRA arrival time", k, s)
			}
			tau := float64(o.Limit.Burst) * per
			if tat > float64(now) {
				st.Remaining = max(0, min(o.Limit.Burst, int64(math.Floor((float64(now)-(tat-tau))/per))))
				st.ResetAfterMs = int64(math.Ceil((tat - float64(now)) / 1000))
			}
		}
		st.Used = o.Limit.Burst - st.Remaining
		return st, nil
	}
	sub := o.Limit.Period.Milliseconds() / int64(o.SubWindows)
	k := int64(o.SubWindows)
	if o.Window == ratelimit.Sliding {
		k++
	}
	var bases []string
	switch o.Mode {
	case ratelimit.Approximate:
		bases = []string{o.Prefix + "{" + tagIn(key, 0, 1) + "}:a:" + key}
	default:
		m := "e:"
		if o.Mode == ratelimit.Leased {
			m = "l:"
		}
		for j := range o.Slots {
			bases = append(bases, o.Prefix+"{"+tagIn(key, j, o.Slots)+"}:"+m+key+":"+strconv.Itoa(j))
		}
	}
	for j, base := range bases {
		res, err := windowScript.Run(ctx, c, []string{base}, sub, k).Int64Slice()
		if err != nil {
			return st, fmt.Errorf("read %q: %w", base, err)
		}
		now, ns := res[0], res[1:]
		budget := o.Limit.Rate / int64(len(bases))
		if int64(j) < o.Limit.Rate%int64(len(bases)) {
			budget++
		}
		ss := slotStatus{Slot: j, Key: base, Budget: budget}
		cur := now / sub
		for i, n := range ns {
			ss.Used += n
			if n > 0 { // sub-window cur-k+1+i leaves the window when sub-window cur+1+i begins
				st.ResetAfterMs = max(st.ResetAfterMs, (cur+int64(i)+1)*sub-now)
			}
		}
		st.Used += ss.Used
		st.Slots = append(st.Slots, ss)
	}
	st.Remaining = max(0, o.Limit.Rate-st.Used)
	if o.Mode == ratelimit.Approximate {
		st.Slots = nil
	}
	return st, nil
}

func renderLimit(st limitStatus) string {
	var b strings.Builder
	name := st.Key
	if !utf8.ValidString(name) {
		name = strconv.Quote(name)
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
