package hotkeys

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Defaults for the zero fields of Options.
const (
	// DefaultSampleRate is the share of Observe calls recorded in the sketch.
	DefaultSampleRate = 1.0 / 16
	// DefaultCapacity is the number of keys tracked per sub-window.
	DefaultCapacity = 1024
	// DefaultWindow is the span of traffic that rates and shares describe.
	DefaultWindow = 10 * time.Second
	// DefaultBuckets is the number of sub-windows the window slides by.
	DefaultBuckets = 5
	// DefaultHotShare is the share of the window's load above which a key becomes hot
	// when neither HotShare nor HotRate is set.
	DefaultHotShare = 0.1
	// DefaultMinSamples is the sampled weight a key needs in the window before it can
	// become hot, so that a handful of samples never declares a celebrity.
	DefaultMinSamples = 32
	// DefaultTopK is the number of keys a Snapshot lists.
	DefaultTopK = 10
)

// Limits of Options fields.
const (
	minCapacity = 16
	maxCapacity = 1 << 20
	maxBuckets  = 64
	minBucket   = time.Millisecond
	// maxShardNames bounds the distinct shard names counted per sub-window and stripe.
	maxShardNames = 1024
)

// Options configure a Detector. The zero value is valid: every zero field takes the
// documented default.
type Options struct {
	// SampleRate is the probability that one Observe call is recorded, in (0, 1]. Estimates
	// are scaled back by 1/SampleRate. Default: DefaultSampleRate (1/16).
	SampleRate float64

	// Capacity is the number of keys the sketch tracks per sub-window, 16..1<<20. Memory is
	// Buckets × Capacity entries whatever the number of distinct keys.
	// Default: DefaultCapacity (1024).
	Capacity int

	// Window is the span of traffic described by rates and shares. It slides in steps of
	// Window/Buckets, so a reading covers between Window-Window/Buckets and Window of
	// history. Window/Buckets must be at least 1ms. Default: DefaultWindow (10s).
	Window time.Duration

	// Buckets is the number of sub-windows, 2..64. Default: DefaultBuckets (5).
	Buckets int

	// HotShare makes a key hot when its share of the window's sampled load reaches it,
	// in [0, 1]; 0 disables the share test. When both HotShare and HotRate are 0,
	// HotShare is DefaultHotShare (0.1).
	HotShare float64
	// CoolShare is the share below which a hot key starts to cool, in [0, HotShare).
	// Default: HotShare/2.
	CoolShare float64
	// HotRate makes a key hot when its estimated rate (events or cost units per second)
	// reaches it; 0 disables the rate test.
	HotRate float64
	// CoolRate is the rate below which a hot key starts to cool, in [0, HotRate).
	// Default: HotRate/2.
	CoolRate float64
	// Hold is how long a hot key must stay below every cool threshold before it cools.
	// Default: Window.
	Hold time.Duration
	// MinSamples is the guaranteed sampled weight (events, or cost units with ObserveCost;
	// the count minus its error bound) a key needs in the window before it can become hot. Default: DefaultMinSamples (32).
	MinSamples uint64

	// EvalInterval is how often the background goroutine calls Evaluate. A negative value
	// starts no goroutine: the host calls Evaluate itself. Default: Window/Buckets.
	EvalInterval time.Duration

	// TopK is the number of keys Snapshot lists, 1..Capacity. Default: DefaultTopK (10).
	TopK int

	// Shard attributes a key to a shard (a cluster master, a routing shard) for
	// ShardView. It runs on the sampled path, outside any lock, and must be safe for
	// concurrent use and cheap. An empty result leaves the event unattributed.
	// Default: nil, no shard view.
	Shard func(key string) string
	// AllShards lists every shard, so that idle shards count in the mean load.
	// Default: nil, only shards that received sampled load are listed.
	AllShards func() []string

	// OnHot is called when a key becomes hot, OnCool when it cools. They run outside the
	// detector's locks, on the goroutine that called Evaluate (the background goroutine
	// unless EvalInterval is negative), in event order for one caller. Default: nil.
	OnHot  func(KeyEvent)
	OnCool func(KeyEvent)

	// Clock returns the current time. Default: time.Now.
	Clock func() time.Time
	// Rand returns uniformly random 64-bit values for sampling; it must be safe for
	// concurrent use. Default: math/rand/v2.Uint64, which reads a per-thread generator
	// of the runtime without a lock.
	Rand func() uint64
	// Logger receives hot and cool transitions at Info level. Default: nil, no logging.
	Logger *slog.Logger
}

// withDefaults validates o and returns it with every zero field set to its default.
func (o Options) withDefaults() (Options, error) {
	if err := o.window(); err != nil {
		return o, err
	}
	if err := o.thresholds(); err != nil {
		return o, err
	}
	if o.Hold == 0 {
		o.Hold = o.Window
	}
	if o.Hold < 0 {
		return o, fmt.Errorf("%w: Options.Hold must be >= 0, got %v", ErrInvalid, o.Hold)
	}
	if o.MinSamples == 0 {
		o.MinSamples = DefaultMinSamples
	}
	if o.EvalInterval == 0 {
		o.EvalInterval = o.Window / time.Duration(o.Buckets)
	}
	if o.TopK == 0 {
		o.TopK = DefaultTopK
	}
	if o.TopK < 1 || o.TopK > o.Capacity {
		return o, fmt.Errorf("%w: Options.TopK must be 1..Capacity (%d), got %d", ErrInvalid, o.Capacity, o.TopK)
	}
	if o.AllShards != nil && o.Shard == nil {
		return o, fmt.Errorf("%w: Options.AllShards needs Options.Shard", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o, nil
}

// window validates and defaults the sampling and the sliding window: SampleRate, Capacity,
// Buckets and Window.
func (o *Options) window() error {
	if o.SampleRate == 0 {
		o.SampleRate = DefaultSampleRate
	}
	if math.IsNaN(o.SampleRate) || o.SampleRate <= 0 || o.SampleRate > 1 {
		return fmt.Errorf("%w: Options.SampleRate must be in (0, 1], got %v", ErrInvalid, o.SampleRate)
	}
	if o.Capacity == 0 {
		o.Capacity = DefaultCapacity
	}
	if o.Capacity < minCapacity || o.Capacity > maxCapacity {
		return fmt.Errorf("%w: Options.Capacity must be %d..%d, got %d", ErrInvalid, minCapacity, maxCapacity, o.Capacity)
	}
	if o.Buckets == 0 {
		o.Buckets = DefaultBuckets
	}
	if o.Buckets < 2 || o.Buckets > maxBuckets {
		return fmt.Errorf("%w: Options.Buckets must be 2..%d, got %d", ErrInvalid, maxBuckets, o.Buckets)
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Window < minBucket*time.Duration(o.Buckets) {
		return fmt.Errorf("%w: Options.Window must be at least Buckets×1ms (%v), got %v", ErrInvalid, minBucket*time.Duration(o.Buckets), o.Window)
	}
	return nil
}

// thresholds validates and defaults the hot and cool thresholds.
func (o *Options) thresholds() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"HotShare", o.HotShare}, {"CoolShare", o.CoolShare}, {"HotRate", o.HotRate}, {"CoolRate", o.CoolRate}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("%w: Options.%s must be a finite number >= 0, got %v", ErrInvalid, f.name, f.v)
		}
	}
	if o.HotShare > 1 {
		return fmt.Errorf("%w: Options.HotShare must be in [0, 1], got %v", ErrInvalid, o.HotShare)
	}
	if o.HotShare == 0 && o.HotRate == 0 {
		if o.CoolShare != 0 || o.CoolRate != 0 {
			return fmt.Errorf("%w: Options.CoolShare and Options.CoolRate need HotShare or HotRate", ErrInvalid)
		}
		o.HotShare = DefaultHotShare
	}
	if o.HotShare > 0 {
		if o.CoolShare == 0 {
			o.CoolShare = o.HotShare / 2
		}
		if o.CoolShare >= o.HotShare {
			return fmt.Errorf("%w: Options.CoolShare must be below Options.HotShare (%v), got %v", ErrInvalid, o.HotShare, o.CoolShare)
		}
	} else if o.CoolShare != 0 {
		return fmt.Errorf("%w: Options.CoolShare needs Options.HotShare", ErrInvalid)
	}
	if o.HotRate > 0 {
		if o.CoolRate == 0 {
			o.CoolRate = o.HotRate / 2
		}
		if o.CoolRate >= o.HotRate {
			return fmt.Errorf("%w: Options.CoolRate must be below Options.HotRate (%v), got %v", ErrInvalid, o.HotRate, o.CoolRate)
		}
	} else if o.CoolRate != 0 {
		return fmt.Errorf("%w: Options.CoolRate needs Options.HotRate", ErrInvalid)
	}
	return nil
}
