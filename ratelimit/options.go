package ratelimit

import (
	"log/slog"
	"math"
	"time"

	"github.com/celebrity-go/celebrity/internal/slot"
)

// Mode chooses how a [Limiter] shares one limit between instances.
type Mode int

const (
	// Exact asks Redis on every request: one script call per Allow, decided atomically on
	// the server, so what it admits is exactly what the window allows, whatever the number
	// of instances: with the default GCRA window up to Burst + Rate in any interval of
	// length Period (2·Rate with the default Burst = Rate: a full burst, then the steady
	// rate), with Sliding at most Rate in any interval of length Period, with Fixed at most
	// Rate per aligned Period (2·Rate across a boundary). Redis load equals the request
	// rate, on one master per key.
	Exact Mode = iota
	// Leased takes chunks of the window's budget from Redis and admits locally until a chunk
	// is spent. It admits at most Rate in any interval of length Period (Sliding, its
	// default) or per aligned Period (Fixed), never more than Exact would; Redis load
	// follows the number of chunks, not the request rate, and is spread over Options.Slots
	// budget slots.
	Leased
	// Approximate counts locally and syncs a shared estimate every SyncInterval. It admits
	// at most Rate + (N-1)·MaxUnsynced in any interval of length Period for N instances
	// (see the package doc); Redis load is one call per instance per SyncInterval per
	// active key.
	Approximate
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case Exact:
		return "exact"
	case Leased:
		return "leased"
	case Approximate:
		return "approximate"
	}
	return "Mode(" + itoa(int64(m)) + ")"
}

// Window chooses what "Rate per Period" means.
type Window int

const (
	// WindowDefault is GCRA in Exact mode and Sliding in Leased and Approximate modes.
	WindowDefault Window = iota
	// GCRA is the generic cell rate algorithm (Exact mode only): in any interval of length
	// x, at most Burst + x·Rate/Period requests are admitted.
	GCRA
	// Sliding cuts Period into SubWindows sub-windows and counts over SubWindows+1 of
	// them: in any interval of length Period, at most Rate requests are admitted.
	Sliding
	// Fixed counts per aligned Period (Unix time divided by Period): at most Rate per
	// window, but up to 2·Rate in an interval of length Period that straddles a boundary.
	Fixed
)

// String returns the window's name.
func (w Window) String() string {
	switch w {
	case WindowDefault:
		return "default"
	case GCRA:
		return "gcra"
	case Sliding:
		return "sliding"
	case Fixed:
		return "fixed"
	}
	return "Window(" + itoa(int64(w)) + ")"
}

// Limit is a rate: Rate requests per Period.
type Limit struct {
	// Rate is how many requests Period admits. Required: 1..2^40.
	Rate int64
	// Period is the length of the window. Required: 1ms..24h, a whole number of
	// milliseconds (with Sliding, divisible by SubWindows milliseconds).
	Period time.Duration
	// Burst is how many requests GCRA admits at once from an idle key. Used by GCRA only.
	// Default: Rate; range 1..Rate.
	Burst int64
}

// HotKeys is the part of a hot-key detector (such as *hotkeys.Detector) a [Limiter] uses:
// it reports every key it is asked about, and asks which keys are hot at most once per
// Options.HotRefresh.
type HotKeys interface {
	Observe(key string)
	Hot() []string
}

// Defaults and limits of [Options].
const (
	// DefaultPrefix is the key prefix used when Options.Prefix is empty.
	DefaultPrefix = "celebrity:ratelimit:"
	// MaxRate bounds Limit.Rate.
	MaxRate = 1 << 40
	// MinPeriod and MaxPeriod bound Limit.Period.
	MinPeriod = time.Millisecond
	MaxPeriod = 24 * time.Hour
	// DefaultSubWindows is the number of sub-windows of a Sliding window when
	// Options.SubWindows is 0.
	DefaultSubWindows = 10
	// MaxSubWindows bounds Options.SubWindows.
	MaxSubWindows = 1000
	// DefaultSlots is the number of budget slots in Leased mode when Options.Slots is 0.
	DefaultSlots = 3
	// MaxSlots bounds Options.Slots.
	MaxSlots = 256
	// DefaultMaxKeys bounds the keys whose local state a Limiter keeps when
	// Options.MaxKeys is 0.
	DefaultMaxKeys = 100_000
	// DefaultMaxKeyBytes is the longest key when Options.MaxKeyBytes is 0.
	DefaultMaxKeyBytes = 512
	// MaxMaxKeyBytes bounds Options.MaxKeyBytes.
	MaxMaxKeyBytes = 64 << 10
	// DefaultHotRefresh is how often the hot set is read when Options.HotRefresh is 0.
	DefaultHotRefresh = time.Second
	// DefaultSlotTimeout is how long a chunk request waits for one budget slot's master
	// in Leased mode when Options.SlotTimeout is 0.
	DefaultSlotTimeout = 250 * time.Millisecond
	// DefaultAttempts is how many times one chunk or sync request is sent when
	// Options.Attempts is 0.
	DefaultAttempts = 3
	maxPrefixBytes  = 256
)

// Options configure a [Limiter]. Zero fields take the documented defaults, except Limit,
// which is required. Every instance sharing a limit must use the same Prefix, Limit, Mode,
// Window, SubWindows and Slots: they decide the key layout and the budget. Limits that
// differ in Limit, Window or SubWindows never share state, even on one key and Prefix (10
// per second and 600 per minute on one user are two Limiters with their own counts).
type Options struct {
	// Limit is the rate every key of this Limiter gets. Required.
	Limit Limit
	// Mode is Exact (default), Leased or Approximate.
	Mode Mode
	// Window is the window semantics. Default: GCRA in Exact mode, Sliding otherwise.
	Window Window
	// SubWindows is the number of sub-windows of a Sliding window. Default: 10; range
	// 2..1000; Period/SubWindows must be a whole number of milliseconds, at least 2 in
	// Leased mode (with a Fixed window, Period itself).
	SubWindows int
	// Slots is how many budget slots one key's budget is split into in Leased mode, each
	// under its own hash tag; slot j's tag hashes to the middle of the j-th of Slots equal
	// ranges of hash slots, so with Slots equal to the master count of a cluster whose
	// masters own equal contiguous ranges, every slot sits on a distinct master. Default: 3;
	// range 1..256 and at most Rate.
	Slots int
	// MaxChunk is the largest chunk one instance takes at once in Leased mode. Unused
	// chunks are the bound on under-admission (see the package doc). Default:
	// max(1, Rate/Slots/8); range 1..Rate/Slots.
	MaxChunk int64
	// SyncInterval is how often an instance syncs its counts of a key with Redis in
	// Approximate mode. Default: Period/10 (at least 1ms); range 1ms..Period.
	SyncInterval time.Duration
	// MaxUnsynced is how many admissions of a key an instance makes between two syncs at
	// most in Approximate mode; reaching it forces a sync. It is also the largest cost one
	// request may have in Approximate mode. Default: max(1, Rate/100); range 1..Rate.
	MaxUnsynced int64
	// SlotTimeout is how long a chunk request waits for one budget slot's master in Leased
	// mode before it asks the next slot. A slot that did not answer in time is skipped by
	// this instance until that request ends (within the client's own timeouts), so a master
	// that stopped answering costs one wait of SlotTimeout, not one per request, and the
	// other slots keep serving. Whatever the client's options, no call waits past its ctx.
	// Default: 250ms; negative: wait for the reply (or ctx).
	SlotTimeout time.Duration
	// HotKeys, when set (Leased mode only), decides which keys lease: keys it does not
	// report hot take exactly their cost from one budget slot per request, as Exact does,
	// on the same budget, so a key may turn hot or cold at any time without overshoot.
	// Default: nil (every key leases).
	HotKeys HotKeys
	// HotRate, when positive (Leased mode only), decides which keys lease by the fleet's
	// request rate for the key, in requests per second: a key takes exactly its cost from
	// one budget slot per request (as Exact does, on the same budget) until the fleet's
	// rate reaches HotRate, then leases chunks on every instance, and goes back to the exact
	// path once the rate has stayed under HotRate/2 for HotCoolDown (2·Period). The rate is
	// estimated from the replies of the calls the instance makes anyway (no extra Redis
	// command; see the package doc for the estimate and its error). Default: 0 (off); range:
	// a finite number ≥ 0; not with HotKeys.
	HotRate float64
	// HotRefresh is how often the hot set is read from HotKeys. Default: 1s.
	HotRefresh time.Duration
	// MaxKeys bounds the keys whose local state (chunks, counts) one Limiter keeps; the
	// least recently used beyond it are dropped. Default: 100,000; range 1..2^24.
	MaxKeys int
	// KeyIdle drops the local state of a key not used for this long. Default: 2·Period
	// (at least 1s).
	KeyIdle time.Duration
	// MaxKeyBytes is the longest accepted key. Default: 512; range 1..65536.
	MaxKeyBytes int
	// Attempts is how many times one chunk or sync request is sent, with the same request
	// ID, when the connection fails. Default: 3; range 1..10.
	Attempts int
	// Prefix is prepended to every key. It must not contain '{' or '}' and is at most 256
	// bytes. Default: "celebrity:ratelimit:".
	Prefix string
	// Clock returns the current time, for chunk deadlines and sync timing. In Leased and
	// Approximate modes it must advance with real time (a chunk's deadline is measured on it
	// from the moment its request was sent). It is called under a key's lock, so it must be
	// cheap and must not call the Limiter. Default: time.Now.
	Clock func() time.Time
	// Logger receives failures that are not returned to a caller. Default: discard.
	Logger *slog.Logger
}

// withDefaults validates o and fills its zero fields.
func (o Options) withDefaults() (Options, error) {
	if err := o.Limit.validate(o.Window == GCRA || (o.Window == WindowDefault && o.Mode == Exact)); err != nil {
		return o, err
	}
	switch {
	case o.Mode < Exact || o.Mode > Approximate:
		return o, invalidf("Options.Mode must be Exact, Leased or Approximate, got %d", o.Mode)
	case o.Window < WindowDefault || o.Window > Fixed:
		return o, invalidf("Options.Window must be WindowDefault, GCRA, Sliding or Fixed, got %d", o.Window)
	case o.Window == GCRA && o.Mode != Exact:
		return o, invalidf("Options.Window GCRA needs Mode Exact, got %v", o.Mode)
	case o.HotKeys != nil && o.Mode != Leased:
		return o, invalidf("Options.HotKeys needs Mode Leased, got %v", o.Mode)
	case math.IsNaN(o.HotRate) || math.IsInf(o.HotRate, 0) || o.HotRate < 0:
		return o, invalidf("Options.HotRate must be a finite number of requests per second, 0 or more, got %v", o.HotRate)
	case o.HotRate > 0 && o.Mode != Leased:
		return o, invalidf("Options.HotRate needs Mode Leased, got %v", o.Mode)
	case o.HotRate > 0 && o.HotKeys != nil:
		return o, invalidf("Options.HotRate and Options.HotKeys both choose the keys that lease: set one, got HotRate %v and a HotKeys", o.HotRate)
	case slot.HasBraces(o.Prefix) || len(o.Prefix) > maxPrefixBytes:
		return o, invalidf("Options.Prefix must be at most %d bytes without '{' or '}', got %q", maxPrefixBytes, o.Prefix)
	}
	if o.Window == WindowDefault {
		o.Window = Sliding
		if o.Mode == Exact {
			o.Window = GCRA
		}
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	var err error
	if o, err = o.windowDefaults(); err != nil {
		return o, err
	}
	if o, err = o.modeDefaults(); err != nil {
		return o, err
	}
	return o.keyDefaults()
}

// validate checks a Limit; gcra tells whether Burst is used.
func (l Limit) validate(gcra bool) error {
	switch {
	case l.Rate < 1 || l.Rate > MaxRate:
		return invalidf("Options.Limit.Rate must be 1..%d, got %d", int64(MaxRate), l.Rate)
	case l.Period < MinPeriod || l.Period > MaxPeriod:
		return invalidf("Options.Limit.Period must be %v..%v, got %v", MinPeriod, MaxPeriod, l.Period)
	case l.Period%time.Millisecond != 0:
		return invalidf("Options.Limit.Period must be a whole number of milliseconds, got %v", l.Period)
	case l.Burst < 0 || l.Burst > l.Rate:
		return invalidf("Options.Limit.Burst must be 0..Rate (%d), got %d", l.Rate, l.Burst)
	case l.Burst != 0 && l.Burst != l.Rate && !gcra:
		return invalidf("Options.Limit.Burst is used by GCRA only; it must be 0 or Rate, got %d", l.Burst)
	}
	return nil
}

// windowDefaults fills SubWindows.
func (o Options) windowDefaults() (Options, error) {
	switch o.Window {
	case GCRA:
		if o.Limit.Burst == 0 {
			o.Limit.Burst = o.Limit.Rate
		}
		o.SubWindows = 1
	case Fixed:
		if o.SubWindows != 0 && o.SubWindows != 1 {
			return o, invalidf("Options.SubWindows must be 0 or 1 with a Fixed window, got %d", o.SubWindows)
		}
		o.SubWindows = 1
	case Sliding:
		if o.SubWindows == 0 {
			o.SubWindows = DefaultSubWindows
		}
		if o.SubWindows < 2 || o.SubWindows > MaxSubWindows {
			return o, invalidf("Options.SubWindows must be 2..%d, got %d", MaxSubWindows, o.SubWindows)
		}
		ms := o.Limit.Period.Milliseconds()
		if ms%int64(o.SubWindows) != 0 {
			return o, invalidf("Options.Limit.Period (%dms) must be divisible by Options.SubWindows (%d) into whole milliseconds", ms, o.SubWindows)
		}
	}
	if o.Mode == Leased && o.subMs() < 2 {
		// A chunk is usable until 1ms before its sub-window ends (the server counts whole
		// milliseconds): with 1ms sub-windows no chunk would ever be usable.
		return o, invalidf("Options.Limit.Period / Options.SubWindows must be at least 2ms in Leased mode, got %dms", o.subMs())
	}
	return o, nil
}

// modeDefaults fills Slots, MaxChunk, SyncInterval and MaxUnsynced.
func (o Options) modeDefaults() (Options, error) {
	if o.Mode != Leased {
		o.Slots = 1
	}
	if o.Slots == 0 {
		o.Slots = DefaultSlots
	}
	if o.Slots < 1 || o.Slots > MaxSlots || int64(o.Slots) > o.Limit.Rate {
		return o, invalidf("Options.Slots must be 1..%d and at most Limit.Rate (%d), got %d", MaxSlots, o.Limit.Rate, o.Slots)
	}
	share := o.Limit.Rate / int64(o.Slots)
	if o.MaxChunk == 0 {
		o.MaxChunk = max(1, share/8)
	}
	if o.MaxChunk < 1 || o.MaxChunk > share {
		return o, invalidf("Options.MaxChunk must be 1..%d (Rate/Slots), got %d", share, o.MaxChunk)
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = max(o.Limit.Period/10, time.Millisecond)
	}
	if o.SyncInterval < time.Millisecond || o.SyncInterval > o.Limit.Period {
		return o, invalidf("Options.SyncInterval must be 1ms..%v (Period), got %v", o.Limit.Period, o.SyncInterval)
	}
	if o.MaxUnsynced == 0 {
		o.MaxUnsynced = max(1, o.Limit.Rate/100)
	}
	if o.MaxUnsynced < 1 || o.MaxUnsynced > o.Limit.Rate {
		return o, invalidf("Options.MaxUnsynced must be 1..%d (Rate), got %d", o.Limit.Rate, o.MaxUnsynced)
	}
	if o.HotRefresh == 0 {
		o.HotRefresh = DefaultHotRefresh
	}
	if o.SlotTimeout == 0 {
		o.SlotTimeout = DefaultSlotTimeout
	}
	if o.HotRefresh < 0 {
		return o, invalidf("Options.HotRefresh must not be negative, got %v", o.HotRefresh)
	}
	return o, nil
}

// keyDefaults fills MaxKeys, KeyIdle, MaxKeyBytes, Attempts, Clock and Logger.
func (o Options) keyDefaults() (Options, error) {
	if o.MaxKeys == 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.MaxKeys < 1 || o.MaxKeys > 1<<24 {
		return o, invalidf("Options.MaxKeys must be 1..%d, got %d", 1<<24, o.MaxKeys)
	}
	if o.KeyIdle == 0 {
		o.KeyIdle = max(2*o.Limit.Period, time.Second)
	}
	if o.KeyIdle < 0 {
		return o, invalidf("Options.KeyIdle must not be negative, got %v", o.KeyIdle)
	}
	if o.MaxKeyBytes == 0 {
		o.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if o.MaxKeyBytes < 1 || o.MaxKeyBytes > MaxMaxKeyBytes {
		return o, invalidf("Options.MaxKeyBytes must be 1..%d, got %d", MaxMaxKeyBytes, o.MaxKeyBytes)
	}
	if o.Attempts == 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Attempts < 1 || o.Attempts > 10 {
		return o, invalidf("Options.Attempts must be 1..10, got %d", o.Attempts)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// subMs is the length of one sub-window (the whole window when not Sliding) in milliseconds.
func (o Options) subMs() int64 {
	return o.Limit.Period.Milliseconds() / int64(o.SubWindows)
}

// HotCoolDown is how many Periods the fleet's rate of a key leasing by Options.HotRate must
// stay under HotRate/2 before the key goes back to the exact path. The estimate averages
// over one Period and a little more, so after one Period it holds no request from before
// the drop; the second Period keeps a key whose traffic dips briefly from switching back
// and forth (each switch to the exact path leaves this instance's chunk unspent).
const HotCoolDown = 2

// coolDown is HotCoolDown Periods.
func (o Options) coolDown() time.Duration { return HotCoolDown * o.Limit.Period }

// budget returns the share of the limit held by slot j of Slots.
func (o Options) budget(j int) int64 {
	b := o.Limit.Rate / int64(o.Slots)
	if int64(j) < o.Limit.Rate%int64(o.Slots) {
		b++
	}
	return b
}

// span is the number of sub-windows the server sums: SubWindows+1 for Sliding, so that any
// interval of length Period (which touches at most SubWindows+1 sub-windows) sees at most
// Rate; 1 for Fixed.
func (o Options) span() int {
	if o.Window == Sliding {
		return o.SubWindows + 1
	}
	return 1
}
