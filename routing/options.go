package routing

import (
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/celebrity-go/celebrity/internal/slot"
)

// Defaults of Options.
const (
	// DefaultPollInterval is how often a Router polls the control Redis when nobody waits.
	DefaultPollInterval = time.Second
	// DefaultRetryInterval is how often a Router polls while callers wait for a newer table.
	DefaultRetryInterval = 50 * time.Millisecond
	// DefaultFetchTimeout bounds one table fetch.
	DefaultFetchTimeout = 2 * time.Second
	// DefaultMaxRedirects bounds the stale-route retries of one Do or Get.
	DefaultMaxRedirects = 3
	// DefaultAwaitTimeout bounds a wait for a newer table when the caller's ctx has no deadline.
	DefaultAwaitTimeout = 5 * time.Second
)

// Options configure a Router. Shards is required; zero values elsewhere mean the defaults.
type Options struct {
	// Shards maps every shard name a table may use to its client (a standalone client or a
	// cluster client). Required; names are non-empty valid UTF-8, as in a table.
	Shards map[string]ShardClient
	// Prefix is the key prefix, in the control Redis and on the shards (no braces), joined
	// to each name with ':' as in [Keys]. Default: DefaultPrefix.
	Prefix string
	// Shard sets retention and log length on every shard; its Prefix is ignored.
	Shard ShardOptions
	// PollInterval is the period of the background poll (real clock). Default: DefaultPollInterval.
	PollInterval time.Duration
	// RetryInterval is the poll period while a caller waits for a newer table.
	// Default: DefaultRetryInterval.
	RetryInterval time.Duration
	// FetchTimeout bounds one fetch from the control Redis. Default: DefaultFetchTimeout.
	FetchTimeout time.Duration
	// MaxRedirects bounds stale-route retries per call, 0..100. Default: DefaultMaxRedirects;
	// set -1 for none.
	MaxRedirects int
	// AwaitTimeout bounds a wait for a newer table when ctx has no deadline.
	// Default: DefaultAwaitTimeout.
	AwaitTimeout time.Duration
	// Logger receives install and fetch-failure events. Default: none.
	Logger *slog.Logger
	// OnInstall, if set, is called after a table is installed, outside any lock.
	OnInstall func(t *Table)
	// Load turns on the per-tenant load summary: the Router counts each tenant's Do and Get
	// calls in a bounded summary and publishes it to the control Redis once per interval
	// (see [ReadTenantLoad]). Default: off.
	Load LoadOptions
	// Clock returns the current time; it aligns the load summary's intervals.
	// Default: time.Now.
	Clock func() time.Time
}

// Defaults of ShardOptions.
const (
	// DefaultOpRetention is how long an idempotency record lives. It must outlive a client's
	// retries and a migration of the unit (snapshot, catch-up, flip), so that a client whose
	// reply was lost before the move finds its result on the new owner.
	DefaultOpRetention = 24 * time.Hour
	// DefaultTombstoneRetention is how long a tombstone lives; a late copy of an older
	// version arriving within it cannot resurrect the record.
	DefaultTombstoneRetention = 24 * time.Hour
	// DefaultLogMaxLen caps each unit's change log (approximately, XADD MAXLEN ~).
	DefaultLogMaxLen = 100_000
)

// ShardOptions configure a Shard. The zero value is valid.
type ShardOptions struct {
	// Prefix is the key prefix (no braces), joined to each name with ':' as in [Keys].
	// Default: DefaultPrefix.
	Prefix string
	// OpRetention is the lifetime of idempotency records. Default: DefaultOpRetention.
	OpRetention time.Duration
	// TombstoneRetention is the lifetime of tombstones. Default: DefaultTombstoneRetention.
	TombstoneRetention time.Duration
	// LogMaxLen caps each unit's change log, approximately; -1 disables the cap.
	// Default: DefaultLogMaxLen.
	LogMaxLen int64
	// Clock returns the current time; expiry of op records and tombstones uses it.
	// Default: time.Now.
	Clock func() time.Time
}

// StoreOptions configure a Store. The zero value is valid.
type StoreOptions struct {
	// Prefix is the key prefix (no braces), joined to each name with ':' as in [Keys].
	// Default: DefaultPrefix.
	Prefix string
	// Shards, if set, are the shards the tables name, by name: with them Publish checks
	// that a tenant a table newly places has no data left in its bucket (see
	// [Store.Publish]). Default: none (no check; [Router.Store] has the Router's shards).
	Shards map[string]ShardClient
}

// withDefaults fills the zero fields of o with the defaults and validates it; errors wrap
// ErrInvalid and name the field. Shards' own options are checked by NewShard.
func (o Options) withDefaults() (Options, error) {
	if err := validPrefix(o.Prefix); err != nil {
		return o, err
	}
	if err := checkShards(o.Shards); err != nil {
		return o, err
	}
	o.PollInterval = orDefault(o.PollInterval, DefaultPollInterval)
	o.RetryInterval = orDefault(o.RetryInterval, DefaultRetryInterval)
	o.FetchTimeout = orDefault(o.FetchTimeout, DefaultFetchTimeout)
	o.AwaitTimeout = orDefault(o.AwaitTimeout, DefaultAwaitTimeout)
	switch {
	case o.MaxRedirects == 0:
		o.MaxRedirects = DefaultMaxRedirects
	case o.MaxRedirects == -1:
		o.MaxRedirects = 0 // none: the Router reads 0 as no retry
	case o.MaxRedirects < 0 || o.MaxRedirects > 100:
		return o, invalidf("Options.MaxRedirects must be -1..100, got %d", o.MaxRedirects)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"PollInterval", o.PollInterval}, {"RetryInterval", o.RetryInterval},
		{"FetchTimeout", o.FetchTimeout}, {"AwaitTimeout", o.AwaitTimeout}} {
		if d.v < time.Millisecond {
			return o, invalidf("Options.%s must be >= 1ms, got %v", d.name, d.v)
		}
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	var err error
	o.Load, err = o.Load.withDefaults()
	return o, err
}

// withDefaults fills the zero fields of o with the defaults and validates it; errors wrap
// ErrInvalid and name the field.
func (o ShardOptions) withDefaults() (ShardOptions, error) {
	if err := validPrefix(o.Prefix); err != nil {
		return o, err
	}
	o.OpRetention = orDefault(o.OpRetention, DefaultOpRetention)
	o.TombstoneRetention = orDefault(o.TombstoneRetention, DefaultTombstoneRetention)
	switch {
	case o.OpRetention < time.Millisecond:
		return o, invalidf("ShardOptions.OpRetention must be >= 1ms, got %v", o.OpRetention)
	case o.TombstoneRetention < time.Millisecond:
		return o, invalidf("ShardOptions.TombstoneRetention must be >= 1ms, got %v", o.TombstoneRetention)
	}
	switch {
	case o.LogMaxLen == 0:
		o.LogMaxLen = DefaultLogMaxLen
	case o.LogMaxLen == -1:
		o.LogMaxLen = 0 // uncapped: the write script reads 0 as no MAXLEN
	case o.LogMaxLen < 0:
		return o, invalidf("ShardOptions.LogMaxLen must be -1 or >= 1, got %d", o.LogMaxLen)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o, nil
}

// withDefaults validates o (the zero value is valid).
func (o StoreOptions) withDefaults() (StoreOptions, error) {
	for name := range o.Shards {
		if err := checkShardName("StoreOptions.Shards: shard name", name); err != nil {
			return o, err
		}
	}
	return o, validPrefix(o.Prefix)
}

// validPrefix refuses a key prefix with braces: it would move every key's hash tag.
// checkShards refuses an empty Options.Shards and names no table can hold.
func checkShards(shards map[string]ShardClient) error {
	if len(shards) == 0 {
		return invalidf("Options.Shards must name at least one shard")
	}
	for name := range shards {
		if err := checkShardName("Options.Shards: shard name", name); err != nil {
			return err
		}
	}
	return nil
}

// checkShardName refuses a shard name that no table can hold: empty, or not valid UTF-8
// (a table is stored as JSON text). what names the argument in the error.
func checkShardName(what, name string) error {
	if name == "" {
		return invalidf("%s must not be empty", what)
	}
	if !utf8.ValidString(name) {
		return invalidf("%s %q is not valid UTF-8 (a table is stored as JSON text)", what, name)
	}
	return nil
}

func validPrefix(p string) error {
	if slot.HasBraces(p) {
		return invalidf("Options.Prefix must not contain braces, got %q", p)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
