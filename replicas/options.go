package replicas

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/celebrity-go/celebrity/internal/slot"
)

// Defaults for the zero fields of [Options].
const (
	// DefaultCopies is the number of physical copies of a hot key.
	DefaultCopies = 3
	// MaxCopies is the largest accepted Options.Copies.
	MaxCopies = 32
	// DefaultPrefix is the prefix of every key the package creates.
	DefaultPrefix = "celebrity:replicas:"
	// DefaultTTL is the TTL used when a call passes a ttl of 0.
	DefaultTTL = time.Hour
	// DefaultTombstoneTTL is how long a Delete keeps its versioned tombstone.
	DefaultTombstoneTTL = 5 * time.Minute
	// DefaultJitter is the fraction of the TTL by which a copy's TTL is shortened at random.
	DefaultJitter = 0.1
	// DefaultLeaseTTL is the lifetime of a fill lease.
	DefaultLeaseTTL = 2 * time.Second
	// DefaultNegativeTTL is how long the fleet answers "not found" after the source said so.
	DefaultNegativeTTL = time.Second
	// DefaultErrorTTL is how long the fleet answers a failed load's error.
	DefaultErrorTTL = time.Second
	// DefaultWaitTimeout bounds the WAIT of a write when Options.WaitReplicas is set.
	DefaultWaitTimeout = time.Second
	// DefaultLoadTimeout bounds one shared GetOrLoad fetch: waiting, loading and filling.
	DefaultLoadTimeout = 10 * time.Second
	// DefaultFleetInterval is how often an instance renews its entry in the fleet roll.
	DefaultFleetInterval = 5 * time.Second
	// DefaultRefreshInterval is how often the cluster slot map is reloaded.
	DefaultRefreshInterval = 10 * time.Second
)

// Options configure a [Replicator]. The zero value is valid: every zero field means its
// documented default.
type Options struct {
	// Copies is the number of physical copies N of a hot key, 1..MaxCopies.
	// Default: DefaultCopies (3).
	Copies int
	// Prefix starts every physical key the package writes, the primary record included, so
	// the host's own keys are never read or written. It names the cache: instances share
	// data (and leases) exactly when they share Prefix. It must not contain '{' or '}'.
	// Default: DefaultPrefix.
	Prefix string
	// Hot lists keys that are hot from the start. Promote and Demote override it.
	Hot []string
	// IsHot, when set, is asked about every key that Hot, Promote and Demote say nothing
	// about (for example a callback fed by a hot-key detector). It is called on every read
	// and write of such a key, so it must be fast and safe for concurrent use.
	IsHot func(key string) bool
	// Affinity pins this instance to one copy of each hot key (chosen once per instance and
	// key), which keeps its connections to fewer nodes. Without it every read picks a copy
	// at random. Across many instances both spread the load evenly.
	Affinity bool
	// DefaultTTL replaces a ttl of 0 in Set and GetOrLoad. Default: DefaultTTL (1h).
	DefaultTTL time.Duration
	// TombstoneTTL is how long Delete's tombstone refuses older writes at the copies. At the
	// logical key it lasts at least as long, and longer while copies registered there may
	// still live (so a copy the Delete could not reach stays known to writers).
	// Default: DefaultTombstoneTTL (5m).
	TombstoneTTL time.Duration
	// Jitter is the fraction, in [0, 0.5], by which each copy's TTL is shortened at random so
	// that copies do not all expire at once. A negative value disables jitter. Tombstones
	// are not jittered: they refuse older writes at every copy for all of TombstoneTTL.
	// Default: DefaultJitter (0.1).
	Jitter float64
	// LeaseTTL is how long a fill lease lasts without a renewal: its holder renews it every
	// LeaseTTL/3 while it loads and fills, so a slow load keeps its lease (up to
	// LoadTimeout), and when the holder dies (or is paused, or cut off from Redis) one
	// waiting caller takes over at most LeaseTTL after its last renewal, with a lease of a
	// whole LeaseTTL of its own, judged by the server's clock. A holder that cannot renew for
	// LeaseTTL can be taken over (the source runs again), and its fill is then refused.
	// Default: DefaultLeaseTTL (2s).
	LeaseTTL time.Duration
	// NegativeTTL is how long, after a load reported ErrNotFound, every GetOrLoad in the
	// fleet answers ErrNotFound without loading (a record kept in the lease). A Set in the
	// meantime wins at once. A negative value turns it off: the next caller loads again.
	// Default: DefaultNegativeTTL (1s).
	NegativeTTL time.Duration
	// ErrorTTL is how long, after a load failed, every GetOrLoad in the fleet answers that
	// error (its text, wrapping ErrLoadFailed) without loading. A negative value turns it
	// off. Default: DefaultErrorTTL (1s).
	ErrorTTL time.Duration
	// WaitReplicas (0..16), when positive, makes every write (Set, Delete, a fill, a copy write)
	// wait until that many replicas of the written master acknowledged it (Redis WAIT), for
	// at most WaitTimeout; a write they did not acknowledge returns an error wrapping
	// ErrNotReplicated (it applied on the master and may be lost by a failover). Zero: no
	// WAIT, and an acknowledged write may be lost when its master fails over before its
	// replica copied it (see the package doc). Default: 0.
	WaitReplicas int
	// WaitTimeout bounds each WAIT. Default: DefaultWaitTimeout (1s).
	WaitTimeout time.Duration
	// Clock tells the time readers compare record expiries with. Default: time.Now.
	Clock func() time.Time
	// LoadTimeout bounds one shared GetOrLoad fetch (waiting for a lease, loading, filling),
	// which runs detached from the callers' contexts. Default: DefaultLoadTimeout (10s).
	LoadTimeout time.Duration
	// RefreshInterval is how often the slot map of a cluster client is reloaded; a negative
	// value turns the periodic reload off (Refresh still works).
	// Default: DefaultRefreshInterval (10s).
	RefreshInterval time.Duration
	// Rand returns random numbers for copy choice and jitter; it must be safe for concurrent
	// use. Lease tokens do not use it (they come from crypto/rand).
	// Default: math/rand/v2.Uint64.
	Rand func() uint64
	// Logger receives background errors (slot map reloads, fleet roll renewals). Default:
	// no logging.
	Logger *slog.Logger
	// FleetKey, when set, names a Redis key (chosen by the host, inside Prefix or not) that
	// every instance of one fleet shares: the fleet's roll. Instances share data exactly
	// when they share Prefix, so instances meant as one fleet but configured with different
	// prefixes would never see each other's writes (and would each load a missing key).
	// With FleetKey, New records the instance and its Prefix in the roll, renewed every
	// FleetInterval and removed by Close, and fails with ErrPrefixMismatch while another
	// prefix is live there; the prefix recorded first keeps the roll until its last
	// instance leaves (or, killed, stops renewing for 3 FleetIntervals). Default: empty (no
	// roll; New does no I/O).
	FleetKey string
	// FleetInterval is how often an instance renews its entry in the roll of FleetKey.
	// Default: DefaultFleetInterval (5s).
	FleetInterval time.Duration
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Copies == 0 {
		o.Copies = DefaultCopies
	}
	if o.Copies < 1 || o.Copies > MaxCopies {
		return o, fmt.Errorf("%w: Options.Copies must be 1..%d, got %d", ErrInvalid, MaxCopies, o.Copies)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if slot.HasBraces(o.Prefix) {
		return o, fmt.Errorf("%w: Options.Prefix must not contain '{' or '}', got %q", ErrInvalid, o.Prefix)
	}
	for _, k := range o.Hot {
		if k == "" {
			return o, fmt.Errorf("%w: Options.Hot must not contain an empty key", ErrInvalid)
		}
	}
	if err := o.fillDurations(); err != nil {
		return o, err
	}
	if o.WaitReplicas < 0 || o.WaitReplicas > 16 {
		return o, fmt.Errorf("%w: Options.WaitReplicas must be 0..16, got %d", ErrInvalid, o.WaitReplicas)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if err := o.fillSpread(); err != nil {
		return o, err
	}
	if o.Rand == nil {
		o.Rand = rand.Uint64
	}
	return o, nil
}

// fillSpread sets RefreshInterval and Jitter to their defaults when zero and validates them:
// RefreshInterval negative (off) or at least 10ms, Jitter negative (off, stored as 0) or in
// (0, 0.5].
func (o *Options) fillSpread() error {
	if o.RefreshInterval == 0 {
		o.RefreshInterval = DefaultRefreshInterval
	}
	if o.RefreshInterval > 0 && o.RefreshInterval < 10*time.Millisecond {
		return fmt.Errorf("%w: Options.RefreshInterval must be negative (off) or at least 10ms, got %v", ErrInvalid, o.RefreshInterval)
	}
	switch {
	case o.Jitter == 0:
		o.Jitter = DefaultJitter
	case o.Jitter < 0:
		o.Jitter = 0
	case o.Jitter > 0.5:
		return fmt.Errorf("%w: Options.Jitter must be in [0, 0.5], got %v", ErrInvalid, o.Jitter)
	}
	return nil
}

// fillDurations sets the zero durations of o to their defaults and validates them: the
// lifetimes and timeouts must be at least 1ms; NegativeTTL and ErrorTTL may also be negative
// (off, stored as 0).
func (o *Options) fillDurations() error {
	durations := []struct {
		name string
		p    *time.Duration
		def  time.Duration
	}{
		{"DefaultTTL", &o.DefaultTTL, DefaultTTL},
		{"TombstoneTTL", &o.TombstoneTTL, DefaultTombstoneTTL},
		{"LeaseTTL", &o.LeaseTTL, DefaultLeaseTTL},
		{"WaitTimeout", &o.WaitTimeout, DefaultWaitTimeout},
		{"LoadTimeout", &o.LoadTimeout, DefaultLoadTimeout},
		{"FleetInterval", &o.FleetInterval, DefaultFleetInterval},
	}
	for _, d := range durations {
		if *d.p == 0 {
			*d.p = d.def
		}
		if *d.p < time.Millisecond {
			return fmt.Errorf("%w: Options.%s must be at least 1ms, got %v", ErrInvalid, d.name, *d.p)
		}
	}
	for _, d := range []struct {
		name string
		p    *time.Duration
		def  time.Duration
	}{{"NegativeTTL", &o.NegativeTTL, DefaultNegativeTTL}, {"ErrorTTL", &o.ErrorTTL, DefaultErrorTTL}} {
		switch {
		case *d.p == 0:
			*d.p = d.def
		case *d.p < 0:
			*d.p = 0
		case *d.p < time.Millisecond:
			return fmt.Errorf("%w: Options.%s must be negative (off) or at least 1ms, got %v", ErrInvalid, d.name, *d.p)
		}
	}
	return nil
}
