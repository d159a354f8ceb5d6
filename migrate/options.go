package migrate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/celebrity-go/celebrity/routing"
)

// Control is the part of a go-redis client a Coordinator and a Cache need in the control
// Redis: the route table store's commands and the journal's. *redis.Client,
// *redis.ClusterClient and redis.UniversalClient satisfy it.
type Control interface {
	routing.Control
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	ZRange(ctx context.Context, key string, start, stop int64) *redis.StringSliceCmd
}

// ShardClient is the part of a go-redis client a Coordinator and a Cache need on a shard:
// routing's guarded store, the reads of a snapshot and a change log, and a Cache's copy of a
// key with its remaining TTL. *redis.Client, *redis.ClusterClient and redis.UniversalClient
// satisfy it, so one map of shard clients serves Options.Shards and CacheOptions.Shards.
type ShardClient interface {
	routing.ShardClient
	HScan(ctx context.Context, key string, cursor uint64, match string, count int64) *redis.ScanCmd
	ZMScore(ctx context.Context, key string, members ...string) *redis.FloatSliceCmd
	Dump(ctx context.Context, key string) *redis.StringCmd
	PTTL(ctx context.Context, key string) *redis.DurationCmd
	RestoreReplace(ctx context.Context, key string, ttl time.Duration, value string) *redis.StatusCmd
}

// CacheClient is the former name of a Cache's shard client, now the package's one
// ShardClient.
//
// Deprecated: use ShardClient.
type CacheClient = ShardClient

var (
	_ Control     = (*redis.Client)(nil)
	_ Control     = (*redis.ClusterClient)(nil)
	_ Control     = redis.UniversalClient(nil)
	_ ShardClient = (*redis.Client)(nil)
	_ ShardClient = (*redis.ClusterClient)(nil)
	_ ShardClient = redis.UniversalClient(nil)
)

// Defaults of Options.
const (
	// DefaultBatchSize is how many records, op records or change-log entries one copy
	// round trip moves.
	DefaultBatchSize = 500
	// DefaultCloseLag is the catch-up lag, in change-log entries, under which the source is
	// closed: the write pause then covers at most this many entries.
	DefaultCloseLag = 256
	// DefaultMaxCatchUpRounds bounds the catch-up rounds before the source is closed even if
	// writers keep the lag above CloseLag.
	DefaultMaxCatchUpRounds = 1000
	// DefaultLeaseTTL is how long a driver's lease on a migration lasts without renewal.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultGrace is how long the source's closed copy is kept after the flip before
	// Cleanup may delete it.
	DefaultGrace = 10 * time.Minute
)

// Options configure a Coordinator. Shards is required; every other zero field means the
// documented default.
type Options struct {
	// Shards names the shards' clients, as the route table names them.
	Shards map[string]ShardClient
	// Prefix is routing's key prefix (no braces), on the shards and in the control Redis.
	// The journal lives under "{<Prefix>:table}:migrate" (see routing.Keys for how the
	// prefix is joined). Default: routing.DefaultPrefix.
	Prefix string
	// BatchSize is the number of items per copy round trip, 1..10000. Default: DefaultBatchSize.
	BatchSize int
	// CloseLag is the lag (change-log entries) under which the source is closed, 0..100000.
	// Default: DefaultCloseLag.
	CloseLag int
	// MaxCatchUpRounds bounds catch-up rounds before closing, 1..1000000. The source is
	// also closed, whatever the lag, once the lag has not reached a new low for 2 rounds
	// in a row (writers keep up with the catch-up; the write pause then covers that lag).
	// Default: DefaultMaxCatchUpRounds.
	MaxCatchUpRounds int
	// Grace is how long the source keeps its closed copy after the flip. Default: DefaultGrace.
	Grace time.Duration
	// LeaseTTL is how long a driver's lease on a migration lasts without renewal, 100ms..1h.
	// A driving call renews it every LeaseTTL/3 and with every journal step; a Resume of a
	// migration whose lease runs waits until it ends, so a driver that crashed or stopped
	// (SIGSTOP, a long GC pause) is taken over after at most LeaseTTL, and then fenced.
	// Default: DefaultLeaseTTL.
	LeaseTTL time.Duration
	// TombstoneRetention is the retention given to tombstones copied from the change log
	// (counted from the entry's time); it should equal the shards' routing
	// ShardOptions.TombstoneRetention. Default: routing.DefaultTombstoneRetention.
	TombstoneRetention time.Duration
	// OpRetention is the lifetime of idempotency records on the shards; it should equal
	// the shards' routing ShardOptions.OpRetention. Default: routing.DefaultOpRetention.
	OpRetention time.Duration
	// OpRetryWindow is the longest time after an operation's first attempt at which a
	// client may still retry it with the same operation ID, 1s..OpRetention. A move copies
	// the idempotency records written within this window only (with every record and
	// tombstone), so its cost is bounded by the unit's data plus the writes of the last
	// OpRetryWindow, not by OpRetention's worth of write history. A retry later than the
	// window after its first attempt, on the new owner, finds no record of it and is applied
	// as a new operation. Default: OpRetention (every live idempotency record moves).
	OpRetryWindow time.Duration
	// Clock returns the current time; journal timestamps, the grace period and the expiry of
	// copied records use it. Default: time.Now.
	Clock func() time.Time
	// NewID returns a fresh migration ID when a Spec has none. Default: 16 random hex digits.
	NewID func() string
	// Logger receives one record per state change. Default: none.
	Logger *slog.Logger
	// OnState, if set, is called after every journal write with the migration's new status,
	// on the goroutine driving it. It must not block for long.
	OnState func(Status)
}

// withDefaults fills the zero fields of o with the defaults and validates it; every error
// wraps ErrInvalid and names the field and its allowed range. New calls it once.
func (o Options) withDefaults() (Options, error) {
	for _, step := range []func(*Options) error{
		(*Options).checkShards,
		(*Options).fillCopy,
		(*Options).fillLease,
		(*Options).fillRetention,
		(*Options).fillHooks,
	} {
		if err := step(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// checkShards validates Shards and Prefix and fills Prefix's default.
func (o *Options) checkShards() error {
	if len(o.Shards) == 0 {
		return invalidOption("migrate: Options.Shards must name at least one shard")
	}
	for name, c := range o.Shards {
		if name == "" || c == nil {
			return invalidOption("migrate: Options.Shards must map non-empty names to clients, got %q -> %v", name, c)
		}
	}
	if slot.HasBraces(o.Prefix) {
		return invalidOption("migrate: Options.Prefix must not contain braces, got %q", o.Prefix)
	}
	if o.Prefix == "" {
		o.Prefix = routing.DefaultPrefix
	}
	return nil
}

// fillCopy fills and validates the copy's pacing: BatchSize, CloseLag, MaxCatchUpRounds.
func (o *Options) fillCopy() error {
	o.BatchSize = orDefault(o.BatchSize, DefaultBatchSize)
	if o.BatchSize < 1 || o.BatchSize > 10000 {
		return invalidOption("migrate: Options.BatchSize must be 1..10000, got %d", o.BatchSize)
	}
	o.CloseLag = orDefault(o.CloseLag, DefaultCloseLag)
	if o.CloseLag < 0 || o.CloseLag > 100000 {
		return invalidOption("migrate: Options.CloseLag must be 0..100000, got %d", o.CloseLag)
	}
	o.MaxCatchUpRounds = orDefault(o.MaxCatchUpRounds, DefaultMaxCatchUpRounds)
	if o.MaxCatchUpRounds < 1 || o.MaxCatchUpRounds > 1000000 {
		return invalidOption("migrate: Options.MaxCatchUpRounds must be 1..1000000, got %d", o.MaxCatchUpRounds)
	}
	return nil
}

// fillLease fills and validates the durations of a driver's lease and the source's grace.
func (o *Options) fillLease() error {
	o.Grace = orDefault(o.Grace, DefaultGrace)
	if o.Grace < 0 {
		return invalidOption("migrate: Options.Grace must be >= 0, got %v", o.Grace)
	}
	o.LeaseTTL = orDefault(o.LeaseTTL, DefaultLeaseTTL)
	if o.LeaseTTL < 100*time.Millisecond || o.LeaseTTL > time.Hour {
		return invalidf("Options.LeaseTTL must be 100ms..1h, got %v", o.LeaseTTL)
	}
	return nil
}

// fillRetention fills and validates TombstoneRetention, OpRetention and OpRetryWindow.
func (o *Options) fillRetention() error {
	o.TombstoneRetention = orDefault(o.TombstoneRetention, routing.DefaultTombstoneRetention)
	if o.TombstoneRetention < time.Millisecond {
		return invalidOption("migrate: Options.TombstoneRetention must be >= 1ms, got %v", o.TombstoneRetention)
	}
	o.OpRetention = orDefault(o.OpRetention, routing.DefaultOpRetention)
	if o.OpRetention < time.Millisecond {
		return invalidf("Options.OpRetention must be >= 1ms, got %v", o.OpRetention)
	}
	o.OpRetryWindow = orDefault(o.OpRetryWindow, o.OpRetention)
	if o.OpRetryWindow < time.Second && o.OpRetryWindow != o.OpRetention || o.OpRetryWindow > o.OpRetention {
		return invalidf("Options.OpRetryWindow must be 1s..OpRetention (%v), got %v", o.OpRetention, o.OpRetryWindow)
	}
	return nil
}

// fillHooks fills the clock (Clock, else time.Now) and the ID source.
func (o *Options) fillHooks() error {
	o.Clock = clockOf(o.Clock)
	if o.NewID == nil {
		o.NewID = randomID
	}
	return nil
}

// clockOf returns clock, or time.Now when clock is nil.
func clockOf(clock func() time.Time) func() time.Time {
	if clock != nil {
		return clock
	}
	return time.Now
}

// orDefault returns v, or def when v is zero.
func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
