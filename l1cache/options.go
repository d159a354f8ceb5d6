package l1cache

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults applied by [New] to zero fields of [Options].
const (
	// DefaultFresh is the default [Options.Fresh].
	DefaultFresh = time.Second
	// DefaultJitter is the default [Options.Jitter].
	DefaultJitter = 0.1
	// DefaultErrorTTL is the default [Options.ErrorTTL].
	DefaultErrorTTL = 250 * time.Millisecond
	// DefaultLoadTimeout is the default [Options.LoadTimeout].
	DefaultLoadTimeout = 10 * time.Second
	// DefaultMaxRefreshes is the default [Options.MaxRefreshes].
	DefaultMaxRefreshes = 64
	// DefaultClockResolution is the resolution of the clock a cache creates when
	// Options.Clock is nil.
	DefaultClockResolution = time.Millisecond
	// RecommendedBeta is the XFetch scale that Vattani et al. found optimal. [Options.Beta] is
	// zero (early refresh off) unless set.
	RecommendedBeta = 1.0
)

// Limits checked by [New].
const (
	maxDuration     = 24 * time.Hour
	maxErrorTTL     = time.Minute
	maxJitter       = 0.5
	maxBeta         = 100.0
	maxRefreshLimit = 1 << 20
	maxEntriesLimit = math.MaxInt32
)

// Options configures a [Cache]. Every zero field takes its documented default, except the
// capacity: a bounded cache needs a bound chosen by its host, so exactly one of MaxEntries
// and MaxCost must be set.
type Options[V any] struct {
	// MaxEntries bounds the number of entries. Set it or MaxCost, not both. Range 1..2^31-1.
	MaxEntries int
	// MaxCost bounds the total cost of the entries as measured by Sizer (typically bytes).
	// It requires Sizer. Set it or MaxEntries, not both.
	MaxCost uint64
	// Sizer returns the cost of a value for MaxCost. It runs once per value stored (by a
	// load or Set), outside the cache's and the store's locks. Negative and error entries
	// cost 1.
	Sizer func(key string, value V) uint32

	// Fresh is how long a loaded value is served without any reload, before jitter.
	// Default: 1s (DefaultFresh). Range 1ns..24h.
	Fresh time.Duration
	// Stale is the window after Fresh in which the old value is served at once while one
	// background refresh runs. Default: 0 (no stale window: a Get after Fresh waits for a
	// load). Range 0..24h.
	Stale time.Duration
	// StaleIfError is how long after Fresh ended the last good value may still be served when
	// loads fail. Default: 0 (a failed load returns its error). Range 0..24h.
	StaleIfError time.Duration
	// ErrorTTL is how long a load error is cached: the loader is not called again for the key
	// before it passes, and Get returns the error (or the last good value within
	// StaleIfError). Default: 250ms (DefaultErrorTTL). Range 1ns..1m, so an error is never
	// cached for long.
	ErrorTTL time.Duration
	// NegativeTTL is how long a load that returned ErrNotFound is cached. Default: Fresh.
	// Range 1ns..24h.
	NegativeTTL time.Duration
	// Jitter is the fraction by which Fresh (and NegativeTTL) is shortened at random for each
	// load, so copies loaded together do not expire together: the fresh window is uniform
	// in [Fresh*(1-Jitter), Fresh]. Default: 0.1 (DefaultJitter). Range 0..0.5; set NoJitter
	// for none.
	Jitter float64
	// NoJitter disables Jitter.
	NoJitter bool
	// Beta scales probabilistic early refresh (XFetch): a fresh hit starts one background
	// refresh with probability exp(-remaining/(Beta*lastLoadDuration)). Default: 0, which
	// disables early refresh; RecommendedBeta is 1. Range 0..100.
	//
	// What it costs: the probability is per hit, so a key hit R times a second starts its
	// refresh about Beta*d*ln(R*Beta*d) before its fresh window ends (d the duration of its
	// last load), and each instance loads it about Fresh/(Fresh - that lead) times per Fresh
	// window instead of once. With d = 1ms and R = 50,000/s the lead is about 4ms, under 1%
	// more loads at Fresh = 1s; but d counts the time the load waited for a CPU, so on a
	// saturated host (d of tens of milliseconds) it reached a third more loads in
	// BenchmarkHotKeyHundredInstances (1.34 against 0.99 Redis reads per instance per second).
	// What it buys: without a Stale window, the Get that finds a hot key expired waits for
	// its load, and XFetch makes that rare because the key is usually reloaded before anyone
	// sees it expire. With a Stale window, expiry already costs no waiting (the old value is
	// served while one refresh runs), so early refresh only trades extra loads for values
	// served slightly younger; leave Beta at 0 there unless that matters.
	Beta float64

	// LoadTimeout bounds every load, which runs detached from the callers' contexts. When it
	// passes, the load's waiters get context.DeadlineExceeded (cached as a load error) even if
	// the loader ignores its context, and a late result is dropped. Default: 10s
	// (DefaultLoadTimeout). Range 1ns..24h.
	LoadTimeout time.Duration
	// MaxRefreshes caps the background refreshes (stale and early) running at once; a refresh
	// over the cap is skipped and tried again by a later hit. Default: 64
	// (DefaultMaxRefreshes). Range 1..2^20.
	MaxRefreshes int

	// Clock returns the current time; every window and load duration is counted on it
	// (through time.Time.Sub, so the monotonic reading of time.Now is used when present). It
	// must be safe for concurrent use. Default (nil): a coarse clock owned by the cache that
	// reads the system time once per millisecond (DefaultClockResolution) in a goroutine
	// stopped by Close, so that a hit reads no system clock; windows then end up to one
	// resolution (more if that goroutine is delayed) late. Several caches can share one
	// otter.CoarseClock clk with func() time.Time { return time.Unix(0, clk.NowNano()) }.
	Clock func() time.Time
	// Rand returns uniformly random 64-bit values for jitter and early refresh (the cache
	// uses the top 53 bits as a fraction in [0, 1)). It must be safe for concurrent use.
	// Default: math/rand/v2.Uint64.
	Rand func() uint64
	// Logger receives loader panics and failed background refreshes. Default: none.
	Logger *slog.Logger
	// OnEvent, if set, is called synchronously for every [Event], outside the cache's locks.
	// It must be fast; it may call the cache.
	OnEvent func(Event)
}

// settings is Options after withDefaults, with the durations in nanoseconds as the clock
// counts them.
type settings[V any] struct {
	Options[V]
	fresh, stale, sie, errTTL, negTTL, loadTimeout int64
}

func newSettings[V any](o Options[V]) settings[V] {
	return settings[V]{Options: o, fresh: int64(o.Fresh), stale: int64(o.Stale),
		sie: int64(o.StaleIfError), errTTL: int64(o.ErrorTTL), negTTL: int64(o.NegativeTTL),
		loadTimeout: int64(o.LoadTimeout)}
}

// withDefaults fills the zero fields of o with their defaults and checks every field. An error
// matches ErrInvalid and names the field and its allowed range.
func (o Options[V]) withDefaults() (Options[V], error) {
	if err := o.checkCapacity(); err != nil {
		return o, err
	}
	o, err := o.durationDefaults()
	if err != nil {
		return o, err
	}
	return o.tuningDefaults()
}

// checkCapacity checks that exactly one bound is set, and the Sizer with MaxCost only.
func (o Options[V]) checkCapacity() error {
	switch {
	case o.MaxEntries != 0 && o.MaxCost != 0:
		return invalidf("set one of Options.MaxEntries and Options.MaxCost, got %d and %d", o.MaxEntries, o.MaxCost)
	case o.MaxEntries == 0 && o.MaxCost == 0:
		return invalidf("Options.MaxEntries must be 1..%d (or set MaxCost), got 0", maxEntriesLimit)
	case o.MaxEntries < 0 || o.MaxEntries > maxEntriesLimit:
		return invalidf("Options.MaxEntries must be 1..%d, got %d", maxEntriesLimit, o.MaxEntries)
	case o.MaxCost != 0 && o.Sizer == nil:
		return invalidf("Options.MaxCost requires Options.Sizer")
	case o.MaxCost == 0 && o.Sizer != nil:
		return invalidf("Options.Sizer requires Options.MaxCost")
	}
	return nil
}

// durationDefaults fills and checks the windows and the load timeout.
func (o Options[V]) durationDefaults() (Options[V], error) {
	if o.Fresh == 0 {
		o.Fresh = DefaultFresh // before the table: NegativeTTL defaults to it
	}
	for _, d := range []struct {
		field         string
		v             *time.Duration
		def, min, max time.Duration
	}{
		{"Fresh", &o.Fresh, DefaultFresh, 1, maxDuration},
		{"Stale", &o.Stale, 0, 0, maxDuration},
		{"StaleIfError", &o.StaleIfError, 0, 0, maxDuration},
		{"ErrorTTL", &o.ErrorTTL, DefaultErrorTTL, 1, maxErrorTTL},
		{"NegativeTTL", &o.NegativeTTL, o.Fresh, 1, maxDuration},
		{"LoadTimeout", &o.LoadTimeout, DefaultLoadTimeout, 1, maxDuration},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < d.min || *d.v > d.max {
			return o, invalidf("Options.%s must be %v..%v, got %v", d.field, d.min, d.max, *d.v)
		}
	}
	return o, nil
}

// tuningDefaults fills and checks Jitter, Beta, MaxRefreshes and Rand.
func (o Options[V]) tuningDefaults() (Options[V], error) {
	if !(o.Jitter >= 0 && o.Jitter <= maxJitter) { // also rejects NaN
		return o, invalidf("Options.Jitter must be 0..%g, got %g", maxJitter, o.Jitter)
	}
	switch {
	case o.NoJitter:
		o.Jitter = 0
	case o.Jitter == 0:
		o.Jitter = DefaultJitter
	}
	if !(o.Beta >= 0 && o.Beta <= maxBeta) {
		return o, invalidf("Options.Beta must be 0..%g, got %g", maxBeta, o.Beta)
	}
	if o.MaxRefreshes < 0 || o.MaxRefreshes > maxRefreshLimit {
		return o, invalidf("Options.MaxRefreshes must be 1..%d, got %d", maxRefreshLimit, o.MaxRefreshes)
	}
	if o.MaxRefreshes == 0 {
		o.MaxRefreshes = DefaultMaxRefreshes
	}
	if o.Rand == nil {
		o.Rand = rand.Uint64
	}
	return o, nil
}
