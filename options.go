package celebrity

import (
	"cmp"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"
	"unicode/utf8"

	"github.com/celebrity-go/celebrity/internal/fleet"
	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

// Defaults applied by New to zero fields of Options.
const (
	// DefaultPrefix starts every key and channel the cache uses besides the logical keys.
	DefaultPrefix = "celebrity:cache:"
	// DefaultMaxEntries is the default Options.MaxEntries.
	DefaultMaxEntries = 100_000
	// DefaultFresh is the default Options.Fresh.
	DefaultFresh = time.Second
	// DefaultStale is the default Options.Stale.
	DefaultStale = 10 * time.Second
	// DefaultTTL is the default Options.TTL.
	DefaultTTL = time.Hour
	// DefaultReportInterval is the default Options.Loop.ReportInterval.
	DefaultReportInterval = time.Second
	// DefaultPollIntervals is the default Options.Loop.PollInterval, in ReportIntervals.
	DefaultPollIntervals = 60
	// DefaultPromoteRate is the default Options.Loop.PromoteRate, in Redis-level reads per second
	// summed over the fleet.
	DefaultPromoteRate = 200.0
	// DefaultHold is the default Options.Loop.Hold.
	DefaultHold = 10 * time.Second
	// DefaultMaxHot is the default Options.Loop.MaxHot.
	DefaultMaxHot = 64
	// DefaultReportTop is the default Options.Loop.ReportTop.
	DefaultReportTop = 16
	// DefaultSummaryShards is the default Options.Loop.SummaryShards.
	DefaultSummaryShards = 4
	// DefaultReportsPerInterval is the default Options.Loop.ReportsPerInterval.
	DefaultReportsPerInterval = 32
	// MaxKeyLen is the longest key accepted, in bytes.
	MaxKeyLen = 16 << 10
)

// Options configures a Cache. Every zero field takes its documented default.
type Options[V any] struct {
	// Codec encodes values for Redis. Default: Bytes when V is []byte, JSON otherwise.
	Codec Codec[V]
	// BatchLoader, when set, loads the keys a GetMany finds in neither the L1 nor Redis with
	// one call (one source query), once for the whole fleet per key. Default: nil: GetMany
	// calls the Loader once per such key, concurrently.
	BatchLoader BatchLoader[V]
	// Clone, when set, copies every value Get returns and every value Set keeps in this
	// instance's L1, so a caller may modify what it got or what it stored (slices.Clone or
	// maps.Clone for a V that is a slice or a map; a deep copy for a struct holding them).
	// Default: nil: the value is the L1's own, shared by every caller of Get of that key on
	// this instance until it is replaced; a caller that modifies it changes what the next
	// Get returns. Treat it as read-only, or set Clone.
	Clone func(V) V

	// MaxEntries bounds the in-process cache (L1) of each instance. Default: 100,000.
	MaxEntries int
	// Fresh is how long the L1 serves a value without reloading it. Default: 1s.
	Fresh time.Duration
	// Stale is the window after Fresh in which the L1 serves the old value while one refresh
	// runs. A negative value turns it off. Default: 10s.
	Stale time.Duration
	// StaleIfError is how long after Fresh the last good value is served while Redis and the
	// source fail. Default: 0 (off). Range 0..24h.
	StaleIfError time.Duration
	// NegativeTTL is how long the L1 remembers ErrNotFound, and the fleet's absent record in
	// Redis answers it to every instance (at least 1ms): the source is asked about a key it
	// does not have once per NegativeTTL across the fleet. Default: Fresh.
	NegativeTTL time.Duration
	// Beta scales the L1's early refresh (XFetch). A negative value turns it off.
	// Default: l1cache.RecommendedBeta (1).
	Beta float64
	// LoadTimeout bounds one load (Redis, lease, source). Default: 10s.
	LoadTimeout time.Duration

	// TTL is the lifetime of a value in Redis (logical key and copies). Default: 1h.
	TTL time.Duration
	// Copies is the number of copies of a hot key on a Redis Cluster, 1..replicas.MaxCopies.
	// Default: 3.
	Copies int
	// Prefix starts every key and channel the cache creates besides the logical keys. It must
	// be 1..128 bytes of UTF-8 without '{' or '}'. Default: "celebrity:cache:".
	Prefix string
	// InstanceID names this instance in the fleet (leader lease, invalidation messages).
	// Every instance needs its own: one that finds another live instance using its ID
	// counts it (Stats.DuplicateInstanceIDs) and logs a warning; the two still never share
	// a leadership (the lease holds the ID with a nonce drawn by New).
	// Default: 16 random hex digits. 1..64 characters of [A-Za-z0-9._-].
	InstanceID string
	// PubSub chooses the invalidation channel's kind (see l1cache.InvalidatorOptions.PubSub):
	// sharded pub/sub on a cluster client, plain pub/sub otherwise. Set l1cache.PubSubGlobal
	// for a server without SSUBSCRIBE, or while instances of an older release still run.
	// Default: l1cache.PubSubAuto.
	PubSub l1cache.PubSubKind

	// Loop configures the fleet loop that finds the hot keys: how often each instance
	// reports its Redis-level reads, the rates that promote and demote a key, and what the
	// reports hold. Every zero field takes its documented default.
	Loop LoopOptions

	// RefreshAhead is how often a hot key that was read since its last refresh is reloaded
	// into the L1 ahead of its expiry, so it never misses. A negative value turns it off.
	// Default: Fresh/2.
	RefreshAhead time.Duration

	// OnEvent, if set, receives promotions and demotions as this instance applies them. It
	// runs on the cache's background goroutine and must not block for long.
	OnEvent func(Event)
	// Logger receives background errors and the one-time notice that replication is off on
	// a standalone server. Default: none.
	Logger *slog.Logger
	// Clock returns the current time for the fleet loop. Default: time.Now.
	Clock func() time.Time
	// Rand returns uniform random bits for the moments of the fleet loop (each instance's
	// report phase) and for replicas' choice of copy; it must be safe for concurrent use.
	// IDs do not use it (they come from crypto/rand). Default: math/rand/v2.Uint64.
	Rand func() uint64
}

// LoopOptions configures the fleet loop (Options.Loop): the detector of Redis-level reads on
// each instance, its reports to the fleet's summary, and the leader's decisions. Every
// instance of a fleet must use the same values. Every zero field takes its documented
// default.
type LoopOptions struct {
	// ReportInterval is how often each instance reports its Redis-level reads to the fleet
	// summary and polls the hot set; a negative value turns the fleet loop off (manual
	// Promote and Demote still work). Default: 1s. Range 10ms..1m.
	ReportInterval time.Duration
	// PollInterval is how often an instance that is not the leader polls the hot set's version
	// in Redis while the hot-set channel is live. The leader announces every change on
	// pub/sub and publishes the version once per ReportInterval as a heartbeat, so a
	// subscribed instance learns a change at once and needs no poll; an instance that has
	// heard nothing on the channel for 3 ReportIntervals (its subscription is down, the
	// leader's heartbeat is late, or there is no leader) polls until it hears the channel
	// again: every ReportInterval while a poll finds no live leader or a version it had not
	// applied, otherwise once per lease of the live leader (3 ReportIntervals at most), and
	// that poll is also how a new leader takes over. It is rounded to whole ReportIntervals.
	// Default: 60×ReportInterval (at most 1h). Range ReportInterval..1h.
	PollInterval time.Duration
	// PromoteRate is the fleet-wide rate of Redis-level reads of one key (per second) at which
	// the key is promoted. The L1 absorbs a key's requests: a key that every one of N instances
	// keeps reading reaches about N/Fresh Redis-level reads per second, whatever its request
	// rate, so with the defaults only a fleet of about 200 instances or more promotes by reads
	// (see the README, "Choosing PromoteRate and Fresh"). Default: 200.
	PromoteRate float64
	// PromoteShare promotes a key also by its share of its node's load: a key whose
	// fleet-wide rate of Redis-level reads reaches PromoteShare times the commands per second
	// of the master that holds it (and at least ShareMinRate) is promoted even under
	// PromoteRate. The leader measures each master's commands per second from INFO stats
	// (total_commands_processed) once every 5 ReportIntervals (at once when it takes over):
	// one command per master. Demotion is
	// unchanged (DemoteRate for Hold). Range 0 (off) or (0, 1]. Default: 0 (off): PromoteRate
	// alone decides, and the leader sends no INFO.
	PromoteShare float64
	// ShareMinRate is the least fleet-wide rate at which PromoteShare promotes a key, so that
	// a key that dominates an idle node is left alone. Range (DemoteRate, PromoteRate].
	// Default: min(2×DemoteRate, PromoteRate).
	ShareMinRate float64
	// DemoteRate is the fleet-wide rate under which a promoted key starts to cool; it is
	// demoted after staying under it for Hold. Range (0, PromoteRate). Default: PromoteRate/4.
	DemoteRate float64
	// Hold is how long a promoted key's fleet-wide rate stays under DemoteRate before it is
	// demoted, counted in whole ReportIntervals: the key is demoted by the evaluation of the
	// ⌈Hold/ReportInterval⌉-th interval in a row under DemoteRate. The interval that holds
	// the last reads counts when its rate is under DemoteRate, so a key whose reads stop is
	// demoted no sooner than Hold − ReportInterval after its last Redis-level read and no
	// later than Hold (rounded up to whole intervals) + ReportInterval + the evaluation's
	// delay after it (see the package doc). Default: 10s.
	Hold time.Duration
	// MaxHot bounds the hot set; the fleet promotes the fastest keys first. Default: 64.
	MaxHot int
	// ReportTop is how many of its heaviest keys each instance reports per interval.
	// Default: 16. Range 1..1024.
	ReportTop int
	// ReportMinRate is the local rate of Redis-level reads per second under which an instance
	// does not report a key (and skips its report when no key reaches it), which cuts the
	// loop's own commands. A key is then promoted only if enough instances each see it at
	// this rate, and a promoted key read under it everywhere counts as 0 towards DemoteRate:
	// set it under DemoteRate divided by the fleet's size for exact hysteresis, or under
	// PromoteRate divided by it to trade some of that for fewer commands, or turn on
	// SlowReportEvery, which counts the keys under it at a fraction of the commands.
	// Default: 0 (every key among ReportTop is reported).
	ReportMinRate float64
	// EarlyReportRate is the local rate of Redis-level reads per second of a key not yet hot
	// at which an instance reports at once, rather than at its own moment of the interval,
	// so that a new celebrity reaches the leader within a quarter interval. It is still one
	// report per instance per interval. Default: 0 (off). Range 0 or ReportMinRate..Loop.PromoteRate.
	EarlyReportRate float64
	// HotReportEvery makes each instance report a key of the hot set only once every
	// HotReportEvery intervals (the instances take turns by their ID), its rate multiplied by
	// HotReportEvery: an estimate of the fleet-wide rate from a share of the fleet, which cuts
	// the reports of a long-lived celebrity by that factor. Use it only with a fleet large
	// enough that each interval's share reads the key (with few instances an interval can see
	// none of them and count as cool). Default: 1 (every interval). Range 1..60.
	HotReportEvery int
	// SlowReportEvery turns on the slow lane for lukewarm keys: the keys an instance reads
	// under ReportMinRate, which its regular reports leave out, but which many instances
	// together may read at PromoteRate (a key each of 1,000 instances reads once a second).
	// Once per interval, at its regular report's moment, each instance adds up the reads of
	// its lukewarm keys over the last interval (a key at or above ReportMinRate then, or
	// reported early, is not counted: the regular lane has it); once every SlowReportEvery
	// intervals (the instances take turns by their ID) it adds its ReportTop/4 heaviest of
	// them (at least one), read at least twice since its previous slow report, to its
	// regular report (a report of its own when it makes none), with their average rate over
	// those intervals.
	// The leader adds to a key's fleet-wide rate the slow reports of the last
	// SlowReportEvery intervals, in which each instance made exactly one: a lukewarm key's
	// rate is a moving average, and since each report averages the SlowReportEvery intervals
	// before it, the reports summed for one interval cover the reads of the
	// 2×SlowReportEvery-1 intervals before it (the older ones at a lower weight), so it is
	// promoted and demoted up to that much later than a key the regular lane sees. An instance with no key at or above
	// ReportMinRate sends one report per SlowReportEvery intervals instead of none.
	// Default: 0 (off). Range 0 or 2..60.
	SlowReportEvery int
	// SummaryShards is the number of Redis keys (each in its own slot) the fleet summary of
	// one interval is spread over; instances are assigned to shards by their ID. The shards'
	// slots are spread evenly over the slot space (shard i near slot (2i+1)·16384/(2·shards)),
	// so on a cluster whose masters own even slot ranges, as many masters as there are shards
	// (all of them when shards ≥ masters) hold one. The leader reads every shard at each
	// evaluation (one full and at most 4 partial ones per interval), so the shards are most of
	// the loop's commands in a small fleet: 4 instances at the default make at most 4 reports
	// and 20 summary reads per interval (see the package doc's formula). Every instance of a
	// fleet must use the same value. Default: 4. Range 1..1024.
	SummaryShards int
	// ReportsPerInterval bounds the regular reports of a large fleet: with N instances
	// reporting (the leader's estimate, which every instance reads with its polls), each
	// instance makes its regular report only once every K = ⌈N/ReportsPerInterval⌉ intervals
	// (the instances take turns by their ID), with its rates multiplied by K, an estimate of
	// the fleet's rate from a share of the fleet; a key it reads at PromoteRate/K or faster
	// it reports every interval at its own rate, so that one instance's reads never count K
	// times towards a promotion. The regular reports then cost about ReportsPerInterval
	// commands per interval whatever the fleet's size, plus one per instance that reads a key
	// that fast (a cost that follows the hot traffic, not the fleet). The price is accuracy:
	// a key's fleet rate is estimated from 1/K of the instances' reads, so a key near
	// PromoteRate may be promoted an interval sooner or later. A fleet of up to
	// ReportsPerInterval instances (K = 1) reports every interval, as with a negative value,
	// which turns the sampling off. Default: 32. Range 1..1024.
	ReportsPerInterval int
}

// withDefaults fills the zero fields of o with their defaults and checks every field; the
// error wraps ErrInvalid and names the field and its allowed range.
func (o Options[V]) withDefaults() (Options[V], error) {
	steps := []func(Options[V]) (Options[V], error){
		Options[V].l1Defaults, Options[V].redisDefaults, Options[V].loopDefaults,
		Options[V].rateDefaults, Options[V].reportDefaults,
	}
	for _, step := range steps {
		var err error
		if o, err = step(o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// l1Defaults fills and checks the options of the in-process cache.
func (o Options[V]) l1Defaults() (Options[V], error) {
	if o.Codec == nil {
		o.Codec = defaultCodec[V]()
	}
	o.MaxEntries = cmp.Or(o.MaxEntries, DefaultMaxEntries)
	if o.MaxEntries < 0 {
		return o, invalidf("Options.MaxEntries must be 1..2^31-1, got %d", o.MaxEntries)
	}
	o.Fresh = cmp.Or(o.Fresh, DefaultFresh)
	if o.Fresh < 0 || o.Fresh > 24*time.Hour {
		return o, invalidf("Options.Fresh must be 1ns..24h, got %s", o.Fresh)
	}
	o.Stale = offOr(o.Stale, DefaultStale)
	if o.StaleIfError < 0 || o.StaleIfError > 24*time.Hour {
		return o, invalidf("Options.StaleIfError must be 0..24h, got %s", o.StaleIfError)
	}
	if o.NegativeTTL < 0 {
		return o, invalidf("Options.NegativeTTL must be 0 (Fresh) or positive, got %s", o.NegativeTTL)
	}
	switch {
	case o.Beta == 0:
		o.Beta = l1cache.RecommendedBeta
	case o.Beta < 0:
		o.Beta = 0
	}
	if o.LoadTimeout < 0 {
		return o, invalidf("Options.LoadTimeout must be 0 (10s) or positive, got %s", o.LoadTimeout)
	}
	return o, nil
}

// redisDefaults fills and checks the options of the values in Redis and of the instance.
func (o Options[V]) redisDefaults() (Options[V], error) {
	o.TTL = cmp.Or(o.TTL, DefaultTTL)
	if o.TTL < time.Millisecond {
		return o, invalidf("Options.TTL must be at least 1ms, got %s", o.TTL)
	}
	o.Copies = cmp.Or(o.Copies, replicas.DefaultCopies)
	if o.Copies < 1 || o.Copies > replicas.MaxCopies {
		return o, invalidf("Options.Copies must be 1..%d, got %d", replicas.MaxCopies, o.Copies)
	}
	o.Prefix = cmp.Or(o.Prefix, DefaultPrefix)
	if len(o.Prefix) > maxPrefixBytes || !utf8.ValidString(o.Prefix) || slot.HasBraces(o.Prefix) {
		return o, invalidf("Options.Prefix must be 1..%d bytes of UTF-8 without '{' or '}', got %q", maxPrefixBytes, o.Prefix)
	}
	if o.InstanceID == "" {
		o.InstanceID = randomID()
	}
	if !validID(o.InstanceID) {
		return o, invalidf("Options.InstanceID must be 1..64 characters of [A-Za-z0-9._-], got %q", o.InstanceID)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Uint64
	}
	return o, nil
}

// loopDefaults fills and checks the fleet loop's periods.
func (o Options[V]) loopDefaults() (Options[V], error) {
	o.Loop.ReportInterval = cmp.Or(o.Loop.ReportInterval, DefaultReportInterval)
	if o.Loop.ReportInterval > 0 && (o.Loop.ReportInterval < 10*time.Millisecond || o.Loop.ReportInterval > time.Minute) {
		return o, invalidf("Options.Loop.ReportInterval must be 10ms..1m (or negative: off), got %s", o.Loop.ReportInterval)
	}
	o.Loop.PollInterval = cmp.Or(o.Loop.PollInterval, min(DefaultPollIntervals*o.Loop.ReportInterval, time.Hour))
	if o.Loop.ReportInterval > 0 && (o.Loop.PollInterval < o.Loop.ReportInterval || o.Loop.PollInterval > time.Hour) {
		return o, invalidf("Options.Loop.PollInterval must be ReportInterval..1h, got %s", o.Loop.PollInterval)
	}
	o.Loop.Hold = cmp.Or(o.Loop.Hold, DefaultHold)
	if o.Loop.Hold < 0 {
		return o, invalidf("Options.Loop.Hold must be 0 (10s) or positive, got %s", o.Loop.Hold)
	}
	o.RefreshAhead = cmp.Or(o.RefreshAhead, o.Fresh/2)
	return o, nil
}

// rateDefaults fills and checks the rates that promote and demote.
func (o Options[V]) rateDefaults() (Options[V], error) {
	o.Loop.PromoteRate = cmp.Or(o.Loop.PromoteRate, DefaultPromoteRate)
	if !(o.Loop.PromoteRate > 0) || math.IsInf(o.Loop.PromoteRate, 1) {
		return o, invalidf("Options.Loop.PromoteRate must be in (0, +Inf), got %v", o.Loop.PromoteRate)
	}
	o.Loop.DemoteRate = cmp.Or(o.Loop.DemoteRate, o.Loop.PromoteRate/4)
	if !(o.Loop.DemoteRate > 0 && o.Loop.DemoteRate < o.Loop.PromoteRate) {
		return o, invalidf("Options.Loop.DemoteRate must be in (0, PromoteRate=%v), got %v", o.Loop.PromoteRate, o.Loop.DemoteRate)
	}
	if !(o.Loop.PromoteShare >= 0 && o.Loop.PromoteShare <= 1) {
		return o, invalidf("Options.Loop.PromoteShare must be 0 (off) or in (0, 1], got %v", o.Loop.PromoteShare)
	}
	o.Loop.ShareMinRate = cmp.Or(o.Loop.ShareMinRate, min(2*o.Loop.DemoteRate, o.Loop.PromoteRate))
	if !(o.Loop.ShareMinRate > o.Loop.DemoteRate && o.Loop.ShareMinRate <= o.Loop.PromoteRate) {
		return o, invalidf("Options.Loop.ShareMinRate must be in (DemoteRate=%v, PromoteRate=%v], got %v", o.Loop.DemoteRate, o.Loop.PromoteRate, o.Loop.ShareMinRate)
	}
	return o, nil
}

// reportDefaults fills and checks what the instances report and the size of the hot set.
func (o Options[V]) reportDefaults() (Options[V], error) {
	o.Loop.MaxHot = cmp.Or(o.Loop.MaxHot, DefaultMaxHot)
	if o.Loop.MaxHot < 1 || o.Loop.MaxHot > 4096 {
		return o, invalidf("Options.Loop.MaxHot must be 1..4096, got %d", o.Loop.MaxHot)
	}
	o.Loop.ReportTop = cmp.Or(o.Loop.ReportTop, DefaultReportTop)
	if o.Loop.ReportTop < 1 || o.Loop.ReportTop > 1024 {
		return o, invalidf("Options.Loop.ReportTop must be 1..1024, got %d", o.Loop.ReportTop)
	}
	if !(o.Loop.ReportMinRate >= 0 && o.Loop.ReportMinRate < o.Loop.PromoteRate) {
		return o, invalidf("Options.Loop.ReportMinRate must be in [0, PromoteRate=%v), got %v", o.Loop.PromoteRate, o.Loop.ReportMinRate)
	}
	if o.Loop.EarlyReportRate != 0 && !(o.Loop.EarlyReportRate >= o.Loop.ReportMinRate && o.Loop.EarlyReportRate <= o.Loop.PromoteRate) {
		return o, invalidf("Options.Loop.EarlyReportRate must be 0 or in [ReportMinRate=%v, PromoteRate=%v], got %v", o.Loop.ReportMinRate, o.Loop.PromoteRate, o.Loop.EarlyReportRate)
	}
	o.Loop.HotReportEvery = cmp.Or(o.Loop.HotReportEvery, 1)
	if o.Loop.HotReportEvery < 1 || o.Loop.HotReportEvery > 60 {
		return o, invalidf("Options.Loop.HotReportEvery must be 1..60, got %d", o.Loop.HotReportEvery)
	}
	if o.Loop.SlowReportEvery != 0 && (o.Loop.SlowReportEvery < 2 || o.Loop.SlowReportEvery > 60) {
		return o, invalidf("Options.Loop.SlowReportEvery must be 0 (off) or 2..60, got %d", o.Loop.SlowReportEvery)
	}
	o.Loop.ReportsPerInterval = cmp.Or(o.Loop.ReportsPerInterval, DefaultReportsPerInterval)
	if o.Loop.ReportsPerInterval > 1024 {
		return o, invalidf("Options.Loop.ReportsPerInterval must be negative (off) or 1..1024, got %d", o.Loop.ReportsPerInterval)
	}
	o.Loop.SummaryShards = cmp.Or(o.Loop.SummaryShards, DefaultSummaryShards)
	if o.Loop.SummaryShards < 1 || o.Loop.SummaryShards > 1024 {
		return o, invalidf("Options.Loop.SummaryShards must be 1..1024, got %d", o.Loop.SummaryShards)
	}
	return o, nil
}

// loopOptions are the options of the Cache's fleet loop; onDemote is told of each demotion.
func (o Options[V]) loopOptions(onDemote func(string)) fleet.Options {
	lo := fleet.Options{
		Prefix: o.Prefix, InstanceID: o.InstanceID, ReportInterval: o.Loop.ReportInterval, PollInterval: o.Loop.PollInterval,
		PromoteRate: o.Loop.PromoteRate, DemoteRate: o.Loop.DemoteRate, PromoteShare: o.Loop.PromoteShare, ShareMinRate: o.Loop.ShareMinRate,
		Hold: o.Loop.Hold, MaxHot: o.Loop.MaxHot, ReportTop: o.Loop.ReportTop, ReportMinRate: o.Loop.ReportMinRate,
		EarlyReportRate: o.Loop.EarlyReportRate, HotReportEvery: o.Loop.HotReportEvery, SlowReportEvery: o.Loop.SlowReportEvery,
		SummaryShards: o.Loop.SummaryShards, ReportsPerInterval: o.Loop.ReportsPerInterval,
		OnDemote: onDemote, Logger: o.Logger, Clock: o.Clock, Rand: o.Rand,
	}
	if on := o.OnEvent; on != nil {
		lo.OnEvent = func(e fleet.Event) {
			on(Event{Kind: EventKind(e.Kind), Key: e.Key, Rate: e.Rate, Manual: e.Manual, HotVersion: e.HotVersion, Decided: e.Decided, At: e.At})
		}
	}
	return lo
}

// offOr is the house rule for an optional duration: zero means def, a negative value means
// off (0).
func offOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// maxPrefixBytes is the longest Options.Prefix accepted.
const maxPrefixBytes = 128

func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

func validKey(key string) error {
	if key == "" {
		return invalidf("key must not be empty (1..%d bytes)", MaxKeyLen)
	}
	if len(key) > MaxKeyLen {
		return invalidf("key must be 1..%d bytes, got %d", MaxKeyLen, len(key))
	}
	return nil
}
