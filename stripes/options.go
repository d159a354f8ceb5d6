package stripes

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/celebrity-go/celebrity/internal/slot"
)

// Defaults and limits of [Options].
const (
	// MaxStripes is the largest stripe count of a generation.
	MaxStripes = 4096
	// DefaultPrefix is the key prefix used when Options.Prefix is empty. It was
	// PreviousDefaultPrefix before v0.2.0: a counter created then stays there, and is not
	// created anew under this one (ErrPreviousPrefix).
	DefaultPrefix = "celebrity:stripes:"
	// DefaultDedupWindow is how long an event is remembered when Options.DedupWindow is 0.
	DefaultDedupWindow = 10 * time.Minute
	// MinDedupWindow and MaxDedupWindow bound Options.DedupWindow.
	MinDedupWindow = 100 * time.Millisecond
	MaxDedupWindow = 7 * 24 * time.Hour
	// DefaultDedupSlices is the number of time slices per window when Options.DedupSlices is 0.
	DefaultDedupSlices = 4
	// MaxDedupSlices bounds Options.DedupSlices.
	MaxDedupSlices = 1024
	// DefaultDedupBits is the width of a dedup record when Options.DedupBits is 0.
	DefaultDedupBits = 63
	// DefaultSetMembers is the largest dedup set when Options.SetMembers is 0: Redis's
	// default set-max-intset-entries, so that every set keeps the compact intset encoding.
	DefaultSetMembers = 512
	// MaxSetMembers bounds Options.SetMembers.
	MaxSetMembers = 4096
	// DefaultMaxIDBytes is the longest event ID when Options.MaxIDBytes is 0.
	DefaultMaxIDBytes = 256
	// MaxMaxIDBytes bounds Options.MaxIDBytes.
	MaxMaxIDBytes = 64 << 10
	// DefaultLayoutMaxAge is how long a cached layout serves Stamp when Options.LayoutMaxAge is 0.
	DefaultLayoutMaxAge = time.Second
	// DefaultOpTimeout bounds each background step when Options.OpTimeout is 0.
	DefaultOpTimeout = 5 * time.Second
	// maxNameBytes bounds Options.Name.
	maxNameBytes = 128
)

// Options configure a [Counter]. Zero fields take the documented defaults, except Name and
// Stripes, which are required.
type Options struct {
	// Name names the counter inside Prefix ("course:72:views"). Required; 1..128 bytes
	// without '{' or '}' (they would break the hash tags of the key layout).
	Name string
	// Prefix is prepended to every key. It must not contain '{' or '}'.
	// Default: DefaultPrefix ("celebrity:stripes:"; see PreviousDefaultPrefix for an upgrade).
	Prefix string
	// Stripes is the stripe count of the first generation, used only when the layout record
	// does not exist yet; afterwards the durable layout wins and [Counter.Resize] changes it.
	// Required: 1..4096.
	Stripes int
	// DedupWindow is how long an event is remembered, measured from its Event.Time on the
	// clock of the Redis server that holds its stripe. Retries inside the window are counted
	// once; later ones get ErrTooOld (see Event.Time). An old generation is sealed one window (plus one slice)
	// after it closed. Default: 10m; range 100ms..168h.
	//
	// DedupWindow, DedupSlices and DedupBits decide where a dedup record lives and how long,
	// so they are recorded when the layout is created and every process must use the same
	// values: a Counter with other values gets an ErrInvalid error from every operation
	// rather than miss the others' records and count their retries again.
	DedupWindow time.Duration
	// DedupSlices is how many time slices one window is cut into. Dedup records of one slice
	// expire together; more slices mean fewer IDs per set and proportionally lower collision
	// odds, at the cost of more, smaller sets. Default: 4; range 1..1024.
	DedupSlices int
	// DedupBits is the width of a dedup record: 63 (int64 intset members, about 9 bytes per
	// event) or 31 (int32 members, about 5 bytes per event, 2^32 times likelier collisions).
	// Default: 63.
	DedupBits int
	// SetMembers bounds a dedup set: a set found holding half as many records (checked on
	// one addition in SetMembers/64) is split, so sets stay well below it (about 0.7 of it
	// at most in simulation). Keep it at or below the server's set-max-intset-entries.
	// Default: 512; range 2..4096.
	SetMembers int
	// MaxIDBytes is the longest accepted event ID. Default: 256; range 1..65536.
	MaxIDBytes int
	// SealInterval is how often the counter's background loop seals old generations whose
	// window has passed. Zero means DedupWindow/4 (at least 100ms); negative disables the
	// loop (call [Counter.Seal] yourself).
	SealInterval time.Duration
	// LayoutMaxAge is how long [Counter.Stamp] trusts its cached copy of the layout record.
	// Add never needs a fresh copy: stripes redirect it. Default: 1s.
	LayoutMaxAge time.Duration
	// OpTimeout bounds each background step (a seal round, a cached-reader refresh).
	// Default: 5s.
	OpTimeout time.Duration
	// Clock returns the current time: Stamp times, resize boundaries, seal eligibility and
	// reader staleness. The dedup window itself is checked on the Redis server's clock.
	// Default: time.Now.
	Clock func() time.Time
	// Logger receives background failures (a seal round that failed). Default: discard.
	Logger *slog.Logger

	// previousFormat makes the Counter behave as the version before home records did, for
	// the rolling-upgrade tests: it creates every layout as a document with stripe keys of
	// their own, and refuses (ErrLayout) a home record or a document listing a home
	// generation, as that version's parser does.
	previousFormat bool
}

// withDefaults validates o and fills its zero fields, in three steps: the names and the
// stripe count (checkNames), the settings that decide where dedup records live and for how
// long (withDedupDefaults), and the background loop and its clock (withLoopDefaults).
func (o Options) withDefaults() (Options, error) {
	if err := o.checkNames(); err != nil {
		return o, err
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	o, err := o.withDedupDefaults()
	if err != nil {
		return o, err
	}
	return o.withLoopDefaults()
}

// checkName validates a counter name; what names it in the error ("Options.Name").
func checkName(what, name string) error {
	switch {
	case name == "" || len(name) > maxNameBytes:
		return invalidf("%s must be 1..%d bytes, got %d", what, maxNameBytes, len(name))
	case slot.HasBraces(name):
		return invalidf("%s must not contain '{' or '}', got %q", what, name)
	}
	return nil
}

// checkNames validates Name, Prefix and Stripes, which have no defaults to fill.
func (o Options) checkNames() error {
	if err := checkName("Options.Name", o.Name); err != nil {
		return err
	}
	switch {
	case slot.HasBraces(o.Prefix):
		return invalidf("Options.Prefix must not contain '{' or '}', got %q", o.Prefix)
	case o.Stripes < 1 || o.Stripes > MaxStripes:
		return invalidf("Options.Stripes must be 1..%d, got %d", MaxStripes, o.Stripes)
	}
	return nil
}

// withDedupDefaults validates and fills DedupWindow, DedupSlices, DedupBits, SetMembers and
// MaxIDBytes.
func (o Options) withDedupDefaults() (Options, error) {
	if o.DedupWindow == 0 {
		o.DedupWindow = DefaultDedupWindow
	}
	if o.DedupWindow < MinDedupWindow || o.DedupWindow > MaxDedupWindow {
		return o, invalidf("Options.DedupWindow must be %v..%v, got %v", MinDedupWindow, MaxDedupWindow, o.DedupWindow)
	}
	if o.DedupSlices == 0 {
		o.DedupSlices = DefaultDedupSlices
	}
	if o.DedupSlices < 1 || o.DedupSlices > MaxDedupSlices {
		return o, invalidf("Options.DedupSlices must be 1..%d, got %d", MaxDedupSlices, o.DedupSlices)
	}
	if o.DedupWindow/time.Duration(o.DedupSlices) < time.Millisecond {
		return o, invalidf("Options.DedupWindow/DedupSlices must be at least 1ms, got %v", o.DedupWindow/time.Duration(o.DedupSlices))
	}
	if o.DedupBits == 0 {
		o.DedupBits = DefaultDedupBits
	}
	if o.DedupBits != 31 && o.DedupBits != 63 {
		return o, invalidf("Options.DedupBits must be 31 or 63, got %d", o.DedupBits)
	}
	if o.SetMembers == 0 {
		o.SetMembers = DefaultSetMembers
	}
	if o.SetMembers < 2 || o.SetMembers > MaxSetMembers {
		return o, invalidf("Options.SetMembers must be 2..%d, got %d", MaxSetMembers, o.SetMembers)
	}
	if o.MaxIDBytes == 0 {
		o.MaxIDBytes = DefaultMaxIDBytes
	}
	if o.MaxIDBytes < 1 || o.MaxIDBytes > MaxMaxIDBytes {
		return o, invalidf("Options.MaxIDBytes must be 1..%d, got %d", MaxMaxIDBytes, o.MaxIDBytes)
	}
	return o, nil
}

// withLoopDefaults validates and fills SealInterval, LayoutMaxAge, OpTimeout, Clock and
// Logger.
func (o Options) withLoopDefaults() (Options, error) {
	if o.SealInterval == 0 {
		o.SealInterval = max(o.DedupWindow/4, 100*time.Millisecond)
	}
	if o.LayoutMaxAge == 0 {
		o.LayoutMaxAge = DefaultLayoutMaxAge
	}
	if o.LayoutMaxAge < 0 {
		return o, invalidf("Options.LayoutMaxAge must not be negative, got %v", o.LayoutMaxAge)
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = DefaultOpTimeout
	}
	if o.OpTimeout < 0 {
		return o, invalidf("Options.OpTimeout must not be negative, got %v", o.OpTimeout)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// sliceMs is the width of one dedup time slice in milliseconds.
func (o Options) sliceMs() int64 {
	return (o.DedupWindow / time.Duration(o.DedupSlices)).Milliseconds()
}

// keys builds the key names of the layout (see the package doc).
type keys struct {
	prefix, name string
}

// layout returns the key of the layout record.
func (k keys) layout() string {
	return slot.Tagged(k.prefix, k.name) + ":layout"
}

// rate returns the key of the hash in which the families of a fleet count the name's writes
// per window of width ms (see rate.lua): the layout's slot.
func (k keys) rate(width int64) string {
	return slot.Tagged(k.prefix, k.name) + ":rate:" + strconv.FormatInt(width, 10)
}

// births returns the key of the hash holding the birth record of the counter (field: its
// name, value: the token of its layout). Its slot is the layout's slot rounded down to a
// multiple of 64, plus half the slot space: on a cluster whose masters own even, contiguous
// slot ranges it lives on another master than the layout record, and the birth records of
// all counters share 256 keys.
func (k keys) births() string {
	s := (slot.Of(k.layout())/64*64 + slot.Count/2) % slot.Count
	return slot.Tagged(k.prefix, slot.TagFor(s)) + ":births"
}

// of returns the key of stripe i of generation g: the layout key itself for a home
// generation (see homeLua), else the stripe's own key.
func (k keys) of(g *genDoc, i int) string {
	if g.Home {
		return k.layout()
	}
	return k.stripe(g.Tags[i], g.Gen, i)
}

// stripe returns the key of stripe i of generation g, placed by its tag.
func (k keys) stripe(tag string, g uint64, i int) string {
	return slot.Tagged(k.prefix, tag) + ":" + k.name + ":" + strconv.FormatUint(g, 10) + ":" + strconv.Itoa(i)
}
