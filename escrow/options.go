package escrow

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/slot"
)

// Defaults and limits of the options.
const (
	// DefaultPrefix is the key prefix used when CentralOptions.Prefix or PoolOptions.Prefix
	// is empty. It was PreviousDefaultPrefix before v0.2.0: a limit created then stays
	// there, and Init refuses to create it anew under this one (ErrPreviousPrefix).
	DefaultPrefix = "celebrity:escrow:"
	// MaxCapacity is the largest capacity a limiter or a pool accepts.
	MaxCapacity = 100000
	// MaxOwners is the largest number of owners in a pool.
	MaxOwners = 1024
	// DefaultLeaseSkew is the clock-skew margin of a lease when LeaseSkew is zero.
	DefaultLeaseSkew = 2 * time.Second
	// MaxNameLen is the longest pool, owner or limit name, in bytes.
	MaxNameLen = 200
	// MaxIDLen is the longest job or transfer ID, in bytes.
	MaxIDLen = 1024
)

// Client is the part of a go-redis client the package uses. Both *redis.Client and
// *redis.ClusterClient satisfy it, and so does redis.UniversalClient.
type Client interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	Time(ctx context.Context) *redis.TimeCmd
	ZRangeWithScores(ctx context.Context, key string, start, stop int64) *redis.ZSliceCmd
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
	Pipeline() redis.Pipeliner
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = redis.UniversalClient(nil)
)

// CentralOptions configures a Central limiter.
type CentralOptions struct {
	// Name identifies the limit; it becomes the hash tag of every key. Required: valid UTF-8,
	// at most MaxNameLen bytes, without '{', '}' or ':'.
	Name string
	// Capacity is the number of permits, numbered 1..Capacity. Required: 1..MaxCapacity.
	Capacity int
	// Prefix is prepended to every key. Default: DefaultPrefix.
	Prefix string
	// Lease, when positive, gives every grant a lease: the holder must Renew before the
	// lease ends (Grant.Expires, by the caller's clock from before the request), and a
	// permit whose lease ended more than LeaseSkew ago by the ledger server's clock is taken
	// back by the next acquire and granted again with a larger fencing token. A holder that
	// outlives its lease may still run: a downstream that checks tokens refuses it. Default:
	// 0, no lease (a job holds its permit until Release). Negative values, and values that
	// are not whole milliseconds (the ledger counts in milliseconds), are refused.
	Lease time.Duration
	// LeaseSkew is the clock-skew margin added to a lease before its permit is taken back: it
	// must cover the difference in clock rate between holders and the ledger's server over a
	// lease (and a failover to a server with another clock). An offset between the clocks
	// needs no margin: a holder counts its lease from its own clock. A Lease shorter than
	// LeaseSkew is allowed: the holder still gets its whole lease (a replayed grant reports
	// the time left), and a dead holder's permit comes back after Lease+LeaseSkew. Default:
	// DefaultLeaseSkew. Values that are not whole milliseconds are refused.
	LeaseSkew time.Duration
	// Witness stores the marker that records that the ledger was created, so that Init does
	// not silently re-create a lost ledger (FLUSHALL, a wrong restore) with every permit
	// free while old holders still run. It should be another server or cluster. Default:
	// the limiter's own client, with the marker in the slot half the slot space away from
	// the ledger's (on a cluster, another master; on a standalone server, a FLUSHALL removes
	// both and the loss cannot be seen).
	Witness Client
	// AllowEviction skips the refusal of a maxmemory-policy that could evict ledger keys.
	// Default: false (Init fails with ErrUnsafeEviction on such a policy).
	AllowEviction bool
	// AllowWeakDurability lets Init accept a server without appendonly yes and appendfsync
	// always, or one that refuses CONFIG GET (then the operator vouches for it); Init then
	// only logs a warning to Logger. Default: false (Init fails with ErrWeakDurability).
	AllowWeakDurability bool
	// Logger receives warnings (for example when CONFIG GET is forbidden) and the record of
	// RestoreLost. Default: none.
	Logger *slog.Logger
	// Clock returns the current time; Acquire and Renew read it before they send the request
	// and count Grant.Expires from it. Fencing never depends on it (the ledger's server
	// decides when a lease has ended). Default: time.Now.
	Clock func() time.Time
}

// Owner names one owner of a partitioned pool and the permits it holds at creation.
type Owner struct {
	// Name identifies the owner. Required: valid UTF-8, at most MaxNameLen bytes, without
	// '{', '}' or ':' (so no two pool and owner names share a hash tag).
	Name string
	// First and Last are the inclusive range of permit numbers the owner starts with.
	First, Last int
}

// PoolOptions configures a partitioned Pool.
type PoolOptions struct {
	// Name identifies the pool. Required: valid UTF-8, at most MaxNameLen bytes, without '{',
	// '}' or ':'.
	Name string
	// Capacity is the number of permits, numbered 1..Capacity. Required: 1..MaxCapacity.
	Capacity int
	// Owners split 1..Capacity into disjoint ranges that together cover it exactly.
	// Required: 1..MaxOwners owners.
	Owners []Owner
	// Prefix is prepended to every key. Default: DefaultPrefix.
	Prefix string
	// Lease, when positive, gives every grant a lease: the holder must Renew before the
	// lease ends (Grant.Expires, by the caller's clock from before the request), and a
	// permit whose lease ended more than LeaseSkew ago by the ledger server's clock is taken
	// back by the next acquire and granted again with a larger fencing token. A holder that
	// outlives its lease may still run: a downstream that checks tokens refuses it. Default:
	// 0, no lease (a job holds its permit until Release). Negative values, and values that
	// are not whole milliseconds (the ledger counts in milliseconds), are refused.
	Lease time.Duration
	// LeaseSkew is the clock-skew margin added to a lease before its permit is taken back: it
	// must cover the difference in clock rate between holders and the ledger's server over a
	// lease (and a failover to a server with another clock). An offset between the clocks
	// needs no margin: a holder counts its lease from its own clock. A Lease shorter than
	// LeaseSkew is allowed: the holder still gets its whole lease (a replayed grant reports
	// the time left), and a dead holder's permit comes back after Lease+LeaseSkew. Default:
	// DefaultLeaseSkew. Values that are not whole milliseconds are refused.
	LeaseSkew time.Duration
	// Witness stores the witness chains (the confirmed steps of every ledger). It should be a
	// deployment that does not share fate with the ledgers: another Redis server or cluster.
	// Default: the pool's own client, where each witness key lives in the slot half the slot
	// space away from its ledger's, so on a cluster whose masters own even slot ranges it is
	// on another master; Init checks that against the cluster's slot map. On a standalone
	// server the default shares the ledgers' fate, and Init refuses it (ErrSharedWitness)
	// unless AllowSharedWitness is set.
	// Neither client may read from replicas (a cluster client with ReadOnly, RouteByLatency
	// or RouteRandomly is refused): a lagging replica shows an old witness.
	Witness Client
	// AllowEviction skips the refusal of a maxmemory-policy that could evict ledger keys.
	// Default: false (Init fails with ErrUnsafeEviction on such a policy).
	AllowEviction bool
	// AllowWeakDurability lets Init accept a server without appendonly yes and appendfsync
	// always, or one that refuses CONFIG GET (then the operator vouches for it); Init then
	// only logs a warning to Logger. Default: false (Init fails with ErrWeakDurability).
	AllowWeakDurability bool
	// AllowSharedWitness lets Init accept witnesses that share a server with their ledgers:
	// a standalone client without a separate Witness, or a cluster slot layout that puts a
	// witness on its ledger's master. Fencing then cannot see a restore or failover of that
	// server. Default: false (Init fails with ErrSharedWitness).
	AllowSharedWitness bool
	// Logger receives warnings (CONFIG GET forbidden, fenced ledgers). Default: none.
	Logger *slog.Logger
	// Clock returns the current time; Acquire and Renew read it before they send the request
	// and count Grant.Expires from it. Fencing never depends on it (the ledger's server
	// decides when a lease has ended). Default: time.Now.
	Clock func() time.Time
}

// checkName refuses a pool, owner or limit name that could not name its keys unambiguously:
// a name becomes part of a hash tag ("{pool:owner}"), so '{', '}' and ':' are refused (with
// ':' allowed, pool "x:y" with owner "z" and pool "x" with owner "y:z" would share a ledger),
// and so is anything that is not valid UTF-8 (transfer records are JSON, which would replace
// such bytes) or longer than MaxNameLen bytes.
func checkName(field, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s must not be empty", ErrInvalid, field)
	case len(v) > MaxNameLen:
		return fmt.Errorf("%w: %s must be at most %d bytes, got %d", ErrInvalid, field, MaxNameLen, len(v))
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s must be valid UTF-8, got %q", ErrInvalid, field, v)
	case slot.HasBraces(v) || strings.ContainsRune(v, ':'):
		return fmt.Errorf("%w: %s must not contain '{', '}' or ':', got %q", ErrInvalid, field, v)
	}
	return nil
}

// checkID refuses a job or transfer ID that is empty, not valid UTF-8 (Reconcile's plans
// and transfer records are JSON) or longer than MaxIDLen bytes.
func checkID(field, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, field)
	case len(v) > MaxIDLen:
		return fmt.Errorf("%w: %s must be at most %d bytes, got %d", ErrInvalid, field, MaxIDLen, len(v))
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s must be valid UTF-8, got %q", ErrInvalid, field, v)
	}
	return nil
}

// leaseDefaults validates a lease and returns the skew margin, DefaultLeaseSkew for zero.
func leaseDefaults(prefix string, lease, skew time.Duration) (time.Duration, error) {
	switch {
	case lease < 0:
		return 0, fmt.Errorf("%w: %s.Lease must be >= 0 (0: no lease), got %s", ErrInvalid, prefix, lease)
	case lease%time.Millisecond != 0:
		// The ledger counts in whole milliseconds; a truncated lease would end at the ledger
		// before the holder's Expires.
		return 0, fmt.Errorf("%w: %s.Lease must be a whole number of milliseconds >= 1ms (0: no lease), got %s", ErrInvalid, prefix, lease)
	case skew < 0:
		return 0, fmt.Errorf("%w: %s.LeaseSkew must be >= 0 (0: DefaultLeaseSkew), got %s", ErrInvalid, prefix, skew)
	case skew%time.Millisecond != 0:
		return 0, fmt.Errorf("%w: %s.LeaseSkew must be a whole number of milliseconds (0: DefaultLeaseSkew), got %s", ErrInvalid, prefix, skew)
	case skew == 0:
		return DefaultLeaseSkew, nil
	}
	return skew, nil
}

// prefixDefault validates a key prefix and returns DefaultPrefix for an empty one.
func prefixDefault(field, prefix string) (string, error) {
	if slot.HasBraces(prefix) {
		return "", fmt.Errorf("%w: %s must not contain '{' or '}', got %q", ErrInvalid, field, prefix)
	}
	if prefix == "" {
		return DefaultPrefix, nil
	}
	return prefix, nil
}

func checkCapacity(field string, c int) error {
	if c < 1 || c > MaxCapacity {
		return fmt.Errorf("%w: %s must be 1..%d, got %d", ErrInvalid, field, MaxCapacity, c)
	}
	return nil
}

// withDefaults validates o and fills its zero fields with the defaults. Every error wraps
// ErrInvalid and names the field and the allowed range.
func (o CentralOptions) withDefaults() (CentralOptions, error) {
	if err := checkName("CentralOptions.Name", o.Name); err != nil {
		return o, err
	}
	if err := checkCapacity("CentralOptions.Capacity", o.Capacity); err != nil {
		return o, err
	}
	var err error
	if o.LeaseSkew, err = leaseDefaults("CentralOptions", o.Lease, o.LeaseSkew); err != nil {
		return o, err
	}
	if o.Prefix, err = prefixDefault("CentralOptions.Prefix", o.Prefix); err != nil {
		return o, err
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o, nil
}

// withDefaults validates o and fills its zero fields with the defaults. Every error wraps
// ErrInvalid and names the field and the allowed range.
func (o PoolOptions) withDefaults() (PoolOptions, error) {
	if err := checkName("PoolOptions.Name", o.Name); err != nil {
		return o, err
	}
	if err := checkCapacity("PoolOptions.Capacity", o.Capacity); err != nil {
		return o, err
	}
	var err error
	if o.LeaseSkew, err = leaseDefaults("PoolOptions", o.Lease, o.LeaseSkew); err != nil {
		return o, err
	}
	if o.Prefix, err = prefixDefault("PoolOptions.Prefix", o.Prefix); err != nil {
		return o, err
	}
	if err := checkOwners(o.Owners, o.Capacity); err != nil {
		return o, err
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o, nil
}

// checkOwners checks that the owners' names are valid and distinct and that their ranges
// split 1..capacity exactly.
func checkOwners(owners []Owner, capacity int) error {
	if n := len(owners); n < 1 || n > MaxOwners {
		return fmt.Errorf("%w: PoolOptions.Owners must hold 1..%d owners, got %d", ErrInvalid, MaxOwners, n)
	}
	seen := make(map[string]bool, len(owners))
	for i, ow := range owners {
		if err := checkName(fmt.Sprintf("PoolOptions.Owners[%d].Name", i), ow.Name); err != nil {
			return err
		}
		if seen[ow.Name] {
			return fmt.Errorf("%w: PoolOptions.Owners[%d].Name %q is used twice", ErrInvalid, i, ow.Name)
		}
		seen[ow.Name] = true
		if ow.First < 1 || ow.Last > capacity || ow.First > ow.Last {
			return fmt.Errorf("%w: PoolOptions.Owners[%d] range must satisfy 1 <= First <= Last <= Capacity (%d), got %d..%d", ErrInvalid,
				i, capacity, ow.First, ow.Last)
		}
	}
	return checkCover(owners, capacity)
}

// checkCover checks that the owners' ranges neither overlap nor leave a permit of
// 1..capacity without an owner.
func checkCover(owners []Owner, capacity int) error {
	ranges := append([]Owner(nil), owners...)
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].First < ranges[j].First })
	next := 1
	for _, r := range ranges {
		if r.First < next {
			return fmt.Errorf("%w: PoolOptions.Owners ranges overlap: owner %q starts at %d, permit %d is already owned", ErrInvalid,
				r.Name, r.First, r.First)
		}
		if r.First > next {
			return fmt.Errorf("%w: PoolOptions.Owners ranges leave permits %d..%d without an owner", ErrInvalid, next, r.First-1)
		}
		next = r.Last + 1
	}
	if next != capacity+1 {
		return fmt.Errorf("%w: PoolOptions.Owners ranges leave permits %d..%d without an owner", ErrInvalid, next, capacity)
	}
	return nil
}
