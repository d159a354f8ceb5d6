package celebrity

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/fleet"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

// Loader reads key from the source of truth and returns its value with its version, as a
// BatchLoader returns each key's. The version must be at least 1 (a loader that returns
// version 0 fails the load with ErrInvalid) and grow with every change of the source (an
// update counter, a commit timestamp), because Redis keeps the highest version it has seen.
// Return ErrNotFound for a key the source does not have. A panic is recovered and returned
// as a *PanicError.
type Loader[V any] func(ctx context.Context, key string) (Versioned[V], error)

// Client is the go-redis client a Cache uses: a *redis.Client, a *redis.ClusterClient or any
// redis.UniversalClient. It is the whole client, not a narrow part of it: the Cache hands it
// to its Replicator (a replicas.Client) and its Invalidator (an l1cache.Client), and with
// Options.Loop.PromoteShare its leader reads each master's INFO.
type Client = redis.UniversalClient

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
)

// Cache is a read-through cache of string keys over Redis that finds its own hot keys and
// defends them: an in-process L1 (stale-while-revalidate, early refresh, stale-if-error,
// negative caching, one load per key), a fleet-wide fill lease so that a popular miss reaches
// the source once, N copies of hot keys on distinct masters, cross-instance invalidation, and
// a fleet-wide detector that promotes and demotes keys by the load they put on Redis.
// It is safe for concurrent use. Create it with New; Close stops its goroutines.
type Cache[V any] struct {
	o      Options[V]
	client redis.UniversalClient
	loader Loader[V]

	l1  *l1cache.Cache[*entry[V]]
	inv *l1cache.Invalidator
	rep *replicas.Replicator
	// loop is this instance's part of the fleet loop (detection, the hot set).
	loop *fleet.Loop

	cluster bool
	// The fields above are read by every Get and written only by New; the stripes below are
	// written by every local change. The padding keeps them off the lines (and line pairs)
	// the Gets read.
	_       [128]byte
	stripes [64]stripe
	epoch   atomic.Uint64 // bumped by InvalidateAll and MarkAllStale

	// hotEntries holds, per hot key, the entry last installed for it (refresh-ahead reads
	// whether a Get touched it since).
	hotEntries sync.Map // key -> *entry[V]
	// refreshStop stops refresh-ahead, refreshWG waits for it.
	refreshStop context.CancelFunc
	refreshWG   sync.WaitGroup

	sourceLoads, refreshes atomic.Uint64

	// many holds the keys GetMany calls are fetching (manyMu), manyWG their fetches.
	manyMu sync.Mutex
	many   map[string]*manyFlight[V]
	manyWG sync.WaitGroup

	closeOnce sync.Once
	closed    atomic.Bool
}

// entry is what the L1 holds: the value, its version, and whether the key was hot when it was
// stored (then Get marks it touched, which tells refresh-ahead the key is still read here).
// An entry a read loaded (loaded) is not touched by its first Get, the read that loaded it:
// a hot key read less often than Fresh would otherwise cost a refresh on top of every miss.
type entry[V any] struct {
	v       V
	version uint64
	hot     bool
	touched atomic.Bool
	loaded  atomic.Bool
}

// stripe orders this instance's local changes of the keys hashed to it: every invalidation
// bumps gen under mu, and a value read from Redis is installed (by Set or refresh-ahead) only
// if gen did not move since before the read.
type stripe struct {
	mu  sync.Mutex
	gen atomic.Uint64
}

// New returns a Cache over client (a *redis.Client or a *redis.ClusterClient) that loads
// missing keys with loader. It subscribes to the invalidation and hot-set channels and starts
// the fleet loop in goroutines owned by the Cache. It fails with an error wrapping ErrInvalid
// if loader is nil or an option is out of range.
func New[V any](client Client, loader Loader[V], opts Options[V]) (*Cache[V], error) {
	if client == nil {
		return nil, invalidf("client must not be nil")
	}
	if loader == nil {
		return nil, invalidf("loader must not be nil")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cache[V]{o: o, client: client, loader: loader}
	_, c.cluster = client.(*redis.ClusterClient)
	if err := c.compose(); err != nil {
		c.closeParts()
		return nil, err
	}
	c.loop.Start()
	c.startRefresh()
	return c, nil
}

// compose builds the parts: the L1 and its Invalidator, the Replicator and the Detector.
func (c *Cache[V]) compose() error {
	o := c.o
	var err error
	c.l1, err = l1cache.New(c.load, l1cache.Options[*entry[V]]{
		MaxEntries: o.MaxEntries, Fresh: o.Fresh, Stale: o.Stale, StaleIfError: o.StaleIfError,
		NegativeTTL: o.NegativeTTL, Beta: o.Beta, LoadTimeout: o.LoadTimeout, Logger: o.Logger,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c.rep, err = replicas.New(c.client, o.replicasOptions())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c.loop, err = fleet.New(c.client, c.rep, o.loopOptions(c.dropHotEntry), randomID())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c.inv, err = l1cache.NewInvalidator(c.client, target[V]{c}, l1cache.InvalidatorOptions{
		Channel: o.invalidationChannel(), InstanceID: o.InstanceID, Logger: o.Logger, PubSub: o.PubSub,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// replicasOptions are the Options of the Cache's Replicator (ACLRule grants its rule).
func (o Options[V]) replicasOptions() replicas.Options {
	return replicas.Options{
		Copies: o.Copies, Prefix: o.Prefix + replicasPrefix, DefaultTTL: o.TTL, LoadTimeout: o.LoadTimeout,
		Logger: o.Logger, Rand: o.Rand,
		// The fleet's absent record lasts as long as the L1 remembers ErrNotFound (at least
		// the 1ms the Replicator accepts), so the source is asked once per NegativeTTL.
		NegativeTTL: max(cmp.Or(o.NegativeTTL, o.Fresh), time.Millisecond),
	}
}

// invalidationChannel is the channel of the Cache's Invalidator.
func (o Options[V]) invalidationChannel() string { return o.Prefix + "inv" }

// Ready waits until this instance receives the fleet's invalidations (its subscription is
// established), ctx is done, or the Cache is closed. Entries loaded before that are marked
// stale when it happens, because invalidations may have been missed; calling Ready before
// serving avoids that one reload.
func (c *Cache[V]) Ready(ctx context.Context) error {
	if err := c.inv.Ready(ctx); err != nil {
		if errors.Is(err, l1cache.ErrClosed) {
			return ErrClosed
		}
		return err
	}
	return nil
}

// Get returns the value of key. A fresh L1 hit returns at once without allocating or touching
// Redis. Otherwise the value comes from Redis (one copy of a hot key, or the logical key) or,
// when Redis has none, from the loader, once for the whole fleet; concurrent Gets of one key
// share that load, each leaving on its own ctx. A key the source does not have returns an
// error matching ErrNotFound (remembered for NegativeTTL). A value is never older than
// Fresh+Stale (+StaleIfError while loads fail) after it was read from Redis, and a Set or
// Delete through any instance reaches this one as soon as its invalidation arrives. After
// Close, Get still serves values present in the L1; one that needs a load returns ErrClosed.
//
// The value returned is shared: every Get of key on this instance returns the same value
// until it is replaced, so a caller must not modify it (a slice's elements, a map, a
// pointed-to struct) unless Options.Clone is set, which makes Get return a copy.
func (c *Cache[V]) Get(ctx context.Context, key string) (V, error) {
	if key == "" || len(key) > MaxKeyLen {
		var zero V
		return zero, validKey(key)
	}
	e, err := c.l1.Get(ctx, key)
	if err != nil {
		var zero V
		if errors.Is(err, l1cache.ErrClosed) {
			err = ErrClosed
		}
		return zero, err
	}
	return c.served(e), nil
}

// served returns the value of an entry a Get answers with: it marks a hot entry touched
// (refresh-ahead keeps it while it is read) and copies the value with Options.Clone.
func (c *Cache[V]) served(e *entry[V]) V {
	if e.hot && !e.touched.Load() {
		if e.loaded.Load() {
			e.loaded.Store(false)
		} else {
			e.touched.Store(true)
		}
	}
	if c.o.Clone != nil {
		return c.o.Clone(e.v)
	}
	return e.v
}

// load is the L1's loader: one Redis-level read (observed by the detector), through the fill
// lease to the source when Redis holds nothing.
func (c *Cache[V]) load(ctx context.Context, key string) (*entry[V], error) {
	c.loop.Observe(key)
	item, err := c.rep.GetOrLoad(ctx, key, c.o.TTL, c.loadSource)
	if err != nil {
		return nil, err
	}
	return c.newEntry(key, item)
}

// loadSource calls the host's loader, recovering a panic and checking its version.
func (c *Cache[V]) loadSource(ctx context.Context, key string) (it replicas.Item, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Key: key, Value: p, Stack: debug.Stack()}
		}
	}()
	c.sourceLoads.Add(1)
	got, err := c.loader(ctx, key)
	if err != nil {
		return replicas.Item{}, err
	}
	if got.Version == 0 {
		return replicas.Item{}, invalidf("the loader returned version 0 for %q; versions must be at least 1", key)
	}
	data, err := encode(c.o.Codec, key, got.Value)
	if err != nil {
		return replicas.Item{}, err
	}
	return replicas.Item{Value: data, Version: got.Version}, nil
}

// Set stores v as key's value with version, after the host wrote it to its database, and
// carries out the safe order: the logical key and the copies in Redis (set-if-newer by
// version), then the fleet invalidation, then this instance's L1. Each step is idempotent,
// so retrying a failed Set with the same version completes it. A step that fails returns a
// *WriteError naming it and bounding what the fleet may serve meanwhile (a failed store
// step's outcome is unknown: Redis may hold v already; see StepStore); a version older than
// the stored one returns an error matching ErrStaleVersion and changes nothing, and other
// content stored under this version one matching ErrConflict (a retry can never succeed). Bad
// input (empty key, version 0, a value the codec refuses) fails with ErrInvalid or ErrCodec
// before anything is written.
func (c *Cache[V]) Set(ctx context.Context, key string, v V, version uint64) error {
	if err := validKey(key); err != nil {
		return err
	}
	if version == 0 {
		return invalidf("Set %q: version must be at least 1, got 0", key)
	}
	data, err := encode(c.o.Codec, key, v)
	if err != nil {
		return err
	}
	if c.closed.Load() {
		return ErrClosed
	}
	st, ep := c.stripe(key), c.epoch.Load()
	g0 := st.gen.Load()
	werr, err := c.writeStep("Set", key, version, c.rep.Set(ctx, key, data, version, c.o.TTL))
	if err != nil {
		return err
	}
	if err := c.inv.Invalidate(ctx, key); err != nil && werr == nil {
		werr = &WriteError{Op: "Set", Key: key, Version: version, Step: StepInvalidate,
			MayServeOlderFor: c.o.Fresh + c.o.Stale, Err: err}
	}
	if werr != nil && werr.Step == StepStore {
		// Redis may or may not hold v: the invalidation dropped this instance's entry too,
		// and the next Get reads what Redis holds.
		return werr
	}
	// The local entry: installed only if nothing but this Set's own drop changed the stripe
	// since before the write (another write's invalidation may carry a newer version).
	st.mu.Lock()
	if st.gen.Load() == g0+1 && c.epoch.Load() == ep {
		if c.o.Clone != nil {
			v = c.o.Clone(v)
		}
		e := &entry[V]{v: v, version: version, hot: c.loop.IsHot(key)}
		c.l1.Set(key, e)
		if e.hot {
			c.hotEntries.Store(key, e)
		}
	}
	st.mu.Unlock()
	if werr != nil {
		return werr
	}
	return nil
}

// Delete removes key after the host deleted it from its database: a versioned tombstone at the
// logical key and the copies (a late Set or fill of this version or older is refused), then
// the fleet invalidation, which also drops this instance's entry. Errors are as for Set.
func (c *Cache[V]) Delete(ctx context.Context, key string, version uint64) error {
	if err := validKey(key); err != nil {
		return err
	}
	if version == 0 {
		return invalidf("Delete %q: version must be at least 1, got 0", key)
	}
	if c.closed.Load() {
		return ErrClosed
	}
	werr, err := c.writeStep("Delete", key, version, c.rep.Delete(ctx, key, version))
	if err != nil {
		return err
	}
	if err := c.inv.Invalidate(ctx, key); err != nil && werr == nil {
		werr = &WriteError{Op: "Delete", Key: key, Version: version, Step: StepInvalidate,
			MayServeOlderFor: c.o.Fresh + c.o.Stale, Err: err}
	}
	if werr != nil {
		return werr
	}
	return nil
}

// writeStep classifies the Redis write's result: nil; a partial write or a failure at the
// logical key, whose outcome is unknown (the later steps still run: the invalidation is
// harmless when the write did not apply and needed when it did); or a stale version or a
// conflict (the write was refused: nothing was written, and the write stops).
func (c *Cache[V]) writeStep(op, key string, version uint64, err error) (*WriteError, error) {
	var pw *replicas.PartialWriteError
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &pw) && !primaryFailed(pw):
		return &WriteError{Op: op, Key: key, Version: version, Step: StepCopies,
			MayServeOlderFor: c.o.TTL + c.o.Fresh + c.o.Stale, Err: err}, nil
	case errors.Is(err, replicas.ErrStaleVersion):
		return nil, fmt.Errorf("celebrity: %s %q version %d: %w", op, key, version, err)
	case errors.Is(err, replicas.ErrConflict):
		return nil, fmt.Errorf("celebrity: %s %q version %d: Redis holds other content under this version; nothing was written, "+
			"and a retry with this version can never succeed (the fleet serves the stored content; write a newer version): %w", op, key, version, err)
	default:
		return &WriteError{Op: op, Key: key, Version: version, Step: StepStore,
			MayServeOlderFor: c.o.TTL + c.o.Fresh + c.o.Stale, Err: err}, nil
	}
}

func primaryFailed(pw *replicas.PartialWriteError) bool {
	for _, f := range pw.Failed {
		if f.Index == replicas.PrimaryIndex {
			return true
		}
	}
	return false
}

func (c *Cache[V]) stripe(key string) *stripe {
	return &c.stripes[xxhash.Sum64String(key)%uint64(len(c.stripes))]
}

// target is what the Invalidator drives: the L1, with every change ordered on its stripe.
type target[V any] struct{ c *Cache[V] }

func (t target[V]) Invalidate(key string) {
	st := t.c.stripe(key)
	st.mu.Lock()
	st.gen.Add(1)
	t.c.l1.Invalidate(key)
	st.mu.Unlock()
}

func (t target[V]) InvalidateAll() {
	t.c.epoch.Add(1)
	t.c.l1.InvalidateAll()
}

func (t target[V]) MarkAllStale() {
	t.c.epoch.Add(1)
	t.c.l1.MarkAllStale()
}

// Close stops the fleet loop, the subscriptions and every load in flight, and waits for
// their goroutines. It does not close the client. Close is idempotent and returns nil.
func (c *Cache[V]) Close() error {
	c.closeOnce.Do(func() {
		c.manyMu.Lock() // no GetMany starts a fetch after this
		c.closed.Store(true)
		c.manyMu.Unlock()
		// The loop and refresh-ahead stop before the parts they call close, as before the
		// loop had a package of its own; the detectors close last, after the L1's loads.
		c.stopRefresh()
		c.loop.Stop()
		c.closeParts()
		c.manyWG.Wait()
	})
	return nil
}

func (c *Cache[V]) closeParts() {
	if c.inv != nil {
		_ = c.inv.Close()
	}
	if c.rep != nil {
		_ = c.rep.Close()
	}
	if c.l1 != nil {
		_ = c.l1.Close()
	}
	if c.loop != nil {
		c.loop.Close()
	}
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
