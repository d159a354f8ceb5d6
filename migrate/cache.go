package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/celebrity-go/celebrity/routing"
)

// CacheOptions configure a Cache. Shards is required.
type CacheOptions struct {
	// Shards names the shards' clients, as the route table names them.
	Shards map[string]ShardClient
	// Prefix is routing's key prefix (no braces). Default: routing.DefaultPrefix.
	Prefix string
	// TenantKeys are the key patterns (globs such as "app:*") of the tenants' own keys that
	// CacheSpec.Keys name: the host's keys, not under Prefix. The Cache does not read it;
	// ACLRule and ShardACLRule grant these patterns on the shards with the commands that copy
	// the keys. Default: none.
	TenantKeys []string
	// Clock returns the current time; journal timestamps and the rollback window use it.
	// Default: time.Now.
	Clock func() time.Time
	// NewID returns a fresh migration ID when a CacheSpec has none. Default: random hex.
	NewID func() string
	// RollbackWindow bounds how long after the flip a rollback is offered as safe, whatever
	// the TTLs: the longer the tenant is served by the target, the more of the old copy is
	// stale (see Cache.Rollback). 1s..24h. Default: DefaultRollbackWindow.
	RollbackWindow time.Duration
}

// DefaultRollbackWindow is CacheOptions.RollbackWindow's default.
const DefaultRollbackWindow = 10 * time.Minute

// withDefaults fills the zero fields of o with the defaults and validates it; every error
// wraps ErrInvalid and names the field and its allowed range. NewCache calls it once.
func (o CacheOptions) withDefaults() (CacheOptions, error) {
	if len(o.Shards) == 0 {
		return o, invalidOption("migrate: CacheOptions.Shards must name at least one shard")
	}
	if slot.HasBraces(o.Prefix) {
		return o, invalidOption("migrate: CacheOptions.Prefix must not contain braces, got %q", o.Prefix)
	}
	if o.Prefix == "" {
		o.Prefix = routing.DefaultPrefix
	}
	o.Clock = clockOf(o.Clock)
	if o.NewID == nil {
		o.NewID = randomID
	}
	o.RollbackWindow = orDefault(o.RollbackWindow, DefaultRollbackWindow)
	if o.RollbackWindow < time.Second || o.RollbackWindow > 24*time.Hour {
		return o, invalidf("CacheOptions.RollbackWindow must be 1s..24h, got %v", o.RollbackWindow)
	}
	return o, nil
}

// Cache moves a tenant of a pure cache (no guarded writes, no ownership records) to another
// shard: it warms the target with the tenant's hottest keys, copied with their remaining
// TTL, then publishes a table that overrides the tenant's placement (a new generation). The
// old copy is left to expire on its own, so until it does, [Cache.Rollback] is a flip back
// to a warm shard. A Cache holds no goroutines and is safe for concurrent use.
type Cache struct {
	control Control
	store   *routing.Store
	shards  map[string]ShardClient
	o       CacheOptions
	keys    routing.Keys
}

// NewCache returns a Cache over the control Redis (route table and journal) and o.Shards.
func NewCache(control Control, o CacheOptions) (*Cache, error) {
	if control == nil {
		return nil, invalidOption("migrate: control client must not be nil")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	store, err := routing.NewStore(control, routing.StoreOptions{Prefix: o.Prefix})
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return &Cache{control: control, store: store, shards: o.Shards, o: o, keys: routing.Keys{Prefix: o.Prefix}}, nil
}

// CacheSpec asks for one cache-mode move.
type CacheSpec struct {
	ID     string   // ID names the move. Default: a fresh random ID.
	Tenant string   // Tenant is the tenant to move (not a spread tenant).
	Target string   // Target is the shard to move it to.
	Keys   []string // Keys are the tenant's hottest keys (from the host or hotkeys), copied before the flip.
}

// The states of a cache-mode move.
const (
	CacheWarming     State = "Warming"     // CacheWarming: copying hot keys to the target.
	CacheFlipped     State = "Flipped"     // CacheFlipped: the override sends the tenant to the target.
	CacheRollingBack State = "RollingBack" // CacheRollingBack: a rollback is publishing the flip back.
	CacheRolledBack  State = "RolledBack"  // CacheRolledBack: flipped back to the source.
	CacheDone        State = "Done"        // CacheDone: finished; rollback no longer offered.
)

// CacheStatus is a cache-mode move's journal record.
type CacheStatus struct {
	ID, Tenant, Source, Target string
	State                      State
	Warmed                     int       // Warmed counts keys copied to the target.
	Missing                    int       // Missing counts listed keys absent on the source.
	FlipGen                    uint64    // FlipGen is the generation of the flip (0 before).
	BackGen                    uint64    // BackGen is the generation of the rollback (0 if none).
	OldCopyExpires             time.Time // OldCopyExpires is when the source's copy of the warmed keys expires (zero: never).
	// HalfExpired is when at least half of the warmed keys' old copies have expired on the
	// source (zero: never, by TTL).
	HalfExpired time.Time
	// Flipped is when the flip was published (zero before).
	Flipped time.Time
	// RollbackSafe is true while a rollback would land on a mostly warm copy: the move is
	// Flipped, at least half of the warmed keys are still alive on the source (a few keys
	// with long or no TTLs do not keep it true), and the flip is less than
	// CacheOptions.RollbackWindow old.
	RollbackSafe bool
	hadOverride  bool
}

func (c *Cache) lock(tenant string) string {
	return journalTag(c.o.Prefix) + ":lock:" + c.keys.Tag(routing.TenantUnit(tenant))
}

func (c *Cache) jkey(id string) string { return journalTag(c.o.Prefix) + ":j:" + id }

// Move warms the target with spec.Keys and flips the tenant's override to the target in a
// new table generation. It returns the move's status (Flipped). Bad input (empty tenant,
// spread tenant, unknown or equal shards) fails with ErrInvalid; a tenant already being
// moved fails with ErrBusy.
func (c *Cache) Move(ctx context.Context, spec CacheSpec) (CacheStatus, error) {
	id, err := checkCacheSpec(spec, c.o.NewID)
	if err != nil {
		return CacheStatus{}, err
	}
	spec.ID = id
	t, err := c.store.Load(ctx)
	if err != nil {
		return CacheStatus{}, fmt.Errorf("migrate: cache move: %w", err)
	}
	source, had, err := planCacheMove(t, spec, func(s string) bool { return c.shards[s] != nil })
	if err != nil {
		return CacheStatus{}, err
	}
	now := c.o.Clock()
	if err := c.create(ctx, spec, source, had, now); err != nil {
		return CacheStatus{}, err
	}
	w, err := c.warm(ctx, c.shards[source], c.shards[spec.Target], spec.Keys, now)
	if err != nil {
		return CacheStatus{}, err
	}
	oldExp, halfExp := w.expiries()
	epoch, err := c.take(ctx, spec.ID, spec.Tenant, CacheWarming)
	if err != nil {
		return CacheStatus{}, err
	}
	defer c.release(ctx, spec.ID, epoch)
	gen, err := c.publish(ctx, spec.ID, epoch, CacheWarming, spec.Tenant, spec.Target, false)
	if err != nil {
		return CacheStatus{}, err
	}
	if err := c.step(ctx, spec.ID, spec.Tenant, epoch, CacheWarming, CacheFlipped, false, "flipgen", u64(gen),
		"warmed", strconv.Itoa(w.warmed), "missing", strconv.Itoa(w.missing), "oldexp", i64(oldExp),
		"halfexp", i64(halfExp), "flipped", ms(c.o.Clock())); err != nil {
		return CacheStatus{}, err
	}
	return c.Status(ctx, spec.ID)
}

// checkCacheSpec is the check Move makes before it reads anything: the tenant must name a
// valid tenant unit, and the move's ID (newID fills an empty one) must not contain braces.
// It returns the ID; it is pure apart from newID.
func checkCacheSpec(spec CacheSpec, newID func() string) (string, error) {
	if err := routing.TenantUnit(spec.Tenant).Validate(); err != nil {
		return "", invalidf("tenant: %v", err)
	}
	id := spec.ID
	if id == "" {
		id = newID()
	}
	if slot.HasBraces(id) {
		return "", invalidf("migration ID must not contain braces, got %q", id)
	}
	return id, nil
}

// planCacheMove is Move's pure planning step: it checks spec against table t and the
// shards the cache has clients for (has), and returns the tenant's current shard (the
// source) and whether an override places it there. Every refusal wraps ErrInvalid.
func planCacheMove(t *routing.Table, spec CacheSpec, has func(shard string) bool) (source string, had bool, err error) {
	if _, spread := t.Spreads[spec.Tenant]; spread {
		return "", false, invalidf("tenant %q is spread; move its sub-buckets instead", spec.Tenant)
	}
	source, had = t.Overrides[spec.Tenant]
	if !had {
		source = t.BucketOwner(uint32(hashing.Bucket(spec.Tenant, uint64(t.Buckets))))
	}
	switch {
	case !has(spec.Target) || !containsShard(t, spec.Target):
		return "", false, invalidf("unknown target shard %q", spec.Target)
	case !has(source):
		return "", false, invalidf("no client for source shard %q", source)
	case spec.Target == source:
		return "", false, invalidf("target %q is the tenant's current shard", spec.Target)
	}
	return source, had, nil
}

// create writes the journal record of a new cache move (state Warming) and takes the
// tenant's migration lock in one script; a tenant already being moved fails with ErrBusy
// and a used ID with ErrInvalid.
func (c *Cache) create(ctx context.Context, spec CacheSpec, source string, had bool, now time.Time) error {
	hadOv := "0"
	if had {
		hadOv = "1"
	}
	reply, err := createScript.Run(ctx, c.control, []string{c.jkey(spec.ID), c.lock(spec.Tenant), journalTag(c.o.Prefix) + ":index"},
		spec.ID, ms(now), "id", spec.ID, "mode", "cache", "tenant", spec.Tenant, "source", source, "target", spec.Target,
		"hadoverride", hadOv, "state", string(CacheWarming), "created", ms(now)).StringSlice()
	if err != nil {
		return fmt.Errorf("migrate: cache move: %w", err)
	}
	if len(reply) == 2 && reply[0] == "busy" {
		return &BusyError{Unit: "tenant " + strconv.Quote(spec.Tenant), Holder: reply[1]}
	}
	if len(reply) != 1 || reply[0] != "ok" {
		return invalidf("migration ID %q is already used", spec.ID)
	}
	return nil
}

// warm copies each of keys from src to dst with its remaining TTL (as of now) and tallies
// what it copied.
func (c *Cache) warm(ctx context.Context, src, dst ShardClient, keys []string, now time.Time) (warmTally, error) {
	w := warmTally{now: now}
	for _, key := range keys {
		ttl, err := src.PTTL(ctx, key).Result()
		if err != nil {
			return w, fmt.Errorf("migrate: cache warm %q: %w", key, err)
		}
		val, err := src.Dump(ctx, key).Result()
		if errors.Is(err, redis.Nil) || ttl == -2 {
			w.missing++
			continue
		}
		if err != nil {
			return w, fmt.Errorf("migrate: cache warm %q: %w", key, err)
		}
		ttl = w.add(ttl)
		if err := dst.RestoreReplace(ctx, key, ttl, val).Err(); err != nil {
			return w, fmt.Errorf("migrate: cache warm %q: %w", key, err)
		}
	}
	return w, nil
}

// warmTally counts a warm-up's keys and the expiries of their old copies on the source.
type warmTally struct {
	now             time.Time
	warmed, missing int
	exps            []int64 // exps are the expiries (unix ms) of the warmed keys that have a TTL.
	forever         bool    // forever is true once a warmed key has no TTL.
}

// add counts one warmed key with remaining TTL ttl (negative: none) and returns the TTL to
// restore it with (0: none). It is pure.
func (w *warmTally) add(ttl time.Duration) time.Duration {
	w.warmed++
	if ttl < 0 {
		w.forever = true
		return 0
	}
	w.exps = append(w.exps, w.now.Add(ttl).UnixMilli())
	return ttl
}

// expiries returns when the old copies of the warmed keys are all gone (oldExp; 0 if one
// has no TTL, or none was warmed) and when half of them are (halfExp: once more than
// warmed/2 expired, at the (warmed/2+1)-th earliest expiry, if that many keys have a TTL
// at all; 0 otherwise). The latest expiry is when the old copy stops being a safe place to
// roll back to. It is pure.
func (w *warmTally) expiries() (oldExp, halfExp int64) {
	if !w.forever {
		for _, e := range w.exps {
			oldExp = max(oldExp, e)
		}
	}
	exps := slices.Clone(w.exps)
	slices.Sort(exps)
	if w.warmed/2 < len(exps) {
		halfExp = exps[w.warmed/2]
	}
	return oldExp, halfExp
}

// cacheLease is the lease a cache-mode step holds on its move's journal record.
const cacheLease = 30 * time.Second

// take makes the caller the only one acting on cache move id, with a new fencing epoch from
// the tenant's epoch counter, if the move is in state `in` (moving it to `to` in the same
// step, if given), so that a step or publication of an older caller (a paused Rollback, a
// second Finish) is refused in the same script as its write (acquire.lua).
func (c *Cache) take(ctx context.Context, id, tenant string, in State, to ...string) (uint64, error) {
	holder := newToken()
	args := []any{holder, i64(cacheLease.Milliseconds()), "1", string(in)}
	for _, v := range to {
		args = append(args, v)
	}
	var reply []string
	err := retryLost(ctx, func() (err error) {
		reply, err = acquireScript.Run(ctx, c.control, []string{c.jkey(id),
			journalTag(c.o.Prefix) + ":epoch:" + c.keys.Tag(routing.TenantUnit(tenant))}, args...).StringSlice()
		return err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("migrate: cache move %q: %w", id, err)
	case len(reply) == 2 && reply[0] == "ok":
		return strconv.ParseUint(reply[1], 10, 64)
	case len(reply) == 2 && reply[0] == "state":
		return 0, &stateError{id: id, found: State(reply[1]), want: []State{in}}
	case len(reply) == 1 && reply[0] == "missing":
		return 0, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return 0, fmt.Errorf("migrate: cache move %q: malformed reply %q", id, reply)
}

// release ends the lease take gave (retried after a lost reply; a fenced release changes
// nothing).
func (c *Cache) release(ctx context.Context, id string, epoch uint64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cacheLease)
	defer cancel()
	_ = retryLost(rctx, func() error {
		return renewScript.Run(rctx, c.control, []string{c.jkey(id)}, u64(epoch), "0").Err()
	})
}

// publish sets (or, with remove, deletes) the tenant's override in a new table generation,
// retrying on a generation conflict, only while move id's journal record holds this
// caller's epoch in state `in` (checked in the same script as the publication).
func (c *Cache) publish(ctx context.Context, id string, epoch uint64, in State, tenant, shard string, remove bool) (uint64, error) {
	for {
		t, err := c.store.Load(ctx)
		if err != nil {
			return 0, fmt.Errorf("migrate: cache flip: %w", err)
		}
		nt := t.Next()
		if remove {
			nt.SetOverride(tenant, "")
		} else {
			nt.SetOverride(tenant, shard)
		}
		err = c.store.PublishGuarded(ctx, nt, c.jkey(id), map[string]string{"epoch": u64(epoch), "state": string(in)})
		if errors.Is(err, routing.ErrGenerationConflict) {
			continue
		}
		if errors.Is(err, routing.ErrFenced) {
			return 0, &FencedError{ID: id, Epoch: epoch, Where: "table"}
		}
		if err != nil {
			return 0, fmt.Errorf("migrate: cache flip: %w", err)
		}
		return nt.Generation, nil
	}
}

// step moves cache move id's journal record from `from` to `to` if the caller's epoch is
// still the record's (otherwise a [*FencedError]).
func (c *Cache) step(ctx context.Context, id, tenant string, epoch uint64, from, to State, release bool, kv ...any) error {
	rel := "0"
	if release {
		rel = "1"
	}
	args := append([]any{string(from), string(to), rel, id, u64(epoch), i64(cacheLease.Milliseconds())}, kv...)
	var reply []string
	err := retryLost(ctx, func() (err error) {
		reply, err = stepScript.Run(ctx, c.control, []string{c.jkey(id), c.lock(tenant)}, args...).StringSlice()
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: cache journal step: %w", err)
	}
	switch {
	case len(reply) >= 2 && (reply[0] == "ok" || reply[0] == "changed" && reply[1] == string(to)):
		return nil
	case len(reply) == 2 && reply[0] == "fenced":
		cur, _ := strconv.ParseUint(reply[1], 10, 64)
		return &FencedError{ID: id, Epoch: epoch, Current: cur, Where: "journal"}
	}
	return fmt.Errorf("migrate: cache move %q: journal is %q, expected %s", id, reply, from)
}
