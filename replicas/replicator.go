package replicas

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/redis/go-redis/v9"
)

// Compile-time checks: both client kinds satisfy the interface New takes.
var (
	_ redis.UniversalClient = (*redis.Client)(nil)
	_ redis.UniversalClient = (*redis.ClusterClient)(nil)
)

// Client is the go-redis client a Replicator uses: a *redis.Client, a *redis.ClusterClient
// or any redis.UniversalClient. It is the whole client, not a narrow part of it: a
// Replicator reads the cluster's topology to place copies on distinct masters, and runs
// scripts, pipelines, plain commands and blocking pops.
type Client = redis.UniversalClient

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
)

// Item is a stored value and the version the host gave it.
type Item struct {
	Value   []byte
	Version uint64
}

// Loader loads key, which Redis does not hold, from the source of truth. Its Item's Version
// must grow with every change of the source (for example an update counter), so that fills
// and Sets are ordered, and name one content: the same version with other bytes is
// ErrConflict.
// Returning ErrNotFound reports a key the source does not have (the fleet then answers
// ErrNotFound for Options.NegativeTTL); another error is answered for Options.ErrorTTL.
type Loader func(ctx context.Context, key string) (Item, error)

// Replicator reads and writes logical keys, keeping N physical copies of the hot ones. It
// is safe for concurrent use. Close stops its background work.
type Replicator struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // nil on a standalone client
	opts    Options
	hot     map[string]struct{} // Options.Hot
	aff     uint64              // this instance's copy offset under Options.Affinity

	mu       sync.RWMutex
	override map[string]bool // Promote (true) and Demote (false)
	layouts  map[string]*layout
	topo     *topology
	gen      uint64

	loadMu sync.Mutex // serialises slot-map loads
	// slotMap is the slot map the topology was last built from (loadMu): a reload that
	// finds the same map builds nothing.
	slotMap *slot.Map

	flightMu sync.Mutex
	flights  map[string]*flight

	wakeMu sync.Mutex
	wakes  map[string]*wakeWait // the blocking read of each wake list under way here
	// blocking holds a token per BLPOP under way (blockingLimit of them at most).
	blocking chan struct{}
	// blockCap bounds one BLPOP (see blockCap).
	blockCap time.Duration

	// lifetime is cancelled by Close; it is the parent of detached GetOrLoad fetches, not a
	// request context.
	lifetime  context.Context
	stop      context.CancelFunc
	refreshCh chan struct{}
	member    string // this instance's member in the roll of Options.FleetKey
	wg        sync.WaitGroup
	closeOnce sync.Once

	stats counters
}

// New returns a Replicator over client, a *redis.Client or a *redis.ClusterClient. Without
// Options.FleetKey it does no I/O: a cluster's slot map is loaded on first use. With a
// cluster client and a positive Options.RefreshInterval it starts one background goroutine,
// stopped by Close. With Options.FleetKey it records the instance in the fleet's roll (one
// script, bounded by 5s) and fails with an error wrapping ErrPrefixMismatch, naming both
// prefixes, when the roll's live instances use another prefix; it then starts a goroutine
// that renews the entry, stopped by Close.
func New(client Client, opts Options) (*Replicator, error) {
	if client == nil {
		return nil, errors.New("replicas: client is nil")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Replicator{
		client:    client,
		opts:      o,
		hot:       make(map[string]struct{}, len(o.Hot)),
		override:  map[string]bool{},
		layouts:   map[string]*layout{},
		flights:   map[string]*flight{},
		wakes:     map[string]*wakeWait{},
		blocking:  make(chan struct{}, blockingLimit(client)),
		blockCap:  blockCap(client),
		refreshCh: make(chan struct{}, 1),
		aff:       o.Rand(),
	}
	for _, k := range o.Hot {
		r.hot[k] = struct{}{}
	}
	r.lifetime, r.stop = context.WithCancel(context.Background())
	if o.FleetKey != "" {
		if err := r.joinFleet(); err != nil {
			r.stop()
			return nil, err
		}
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		r.cluster = cc
		if o.RefreshInterval > 0 {
			r.wg.Add(1)
			go r.refreshLoop()
		}
	}
	return r, nil
}

// joinFleet records r in its fleet's roll (Options.FleetKey), within 5 seconds, and starts
// the loop that keeps it there until Close.
func (r *Replicator) joinFleet() error {
	r.member = rand.Text() + ":" + r.opts.Prefix
	ctx, cancel := context.WithTimeout(r.lifetime, 5*time.Second)
	err := r.enroll(ctx)
	cancel()
	if err != nil {
		return err
	}
	r.wg.Add(1)
	go r.fleetLoop()
	return nil
}

// Close stops the slot-map refresher and cancels GetOrLoad fetches in flight, then waits
// for them: each ends within about a second (a blocked wait for another instance's fill is
// at most that long), even when its loader ignores its context; such a loader keeps running
// in its own goroutine until it returns, and its result is dropped. Callers waiting on
// those fetches get ErrClosed or their context's error. Close does not close the client. It
// is safe to call more than once.
func (r *Replicator) Close() error {
	r.closeOnce.Do(func() {
		r.stop()
		r.wg.Wait()
		if r.member != "" {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = r.client.ZRem(ctx, r.opts.FleetKey, r.member).Err()
			cancel()
		}
	})
	return nil
}

// refreshLoop reloads the slot map every RefreshInterval, and soon after a copy fails.
func (r *Replicator) refreshLoop() {
	defer r.wg.Done()
	tick := time.NewTicker(r.opts.RefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-r.lifetime.Done():
			return
		case <-tick.C:
		case <-r.refreshCh:
		}
		ctx, cancel := context.WithTimeout(r.lifetime, 5*time.Second)
		if err := r.Refresh(ctx); err != nil && r.opts.Logger != nil && r.lifetime.Err() == nil {
			r.opts.Logger.Warn("replicas: slot map refresh failed", "err", err)
		}
		cancel()
	}
}

// enroll records this instance in the roll of Options.FleetKey for 3 FleetIntervals, unless
// another prefix is live there.
func (r *Replicator) enroll(ctx context.Context) error {
	life := 3 * r.opts.FleetInterval
	res, err := fleetScript.Run(ctx, r.client, []string{r.opts.FleetKey}, r.member, life.Milliseconds()).Slice()
	if err != nil {
		return fmt.Errorf("replicas: fleet roll %q: %w", r.opts.FleetKey, err)
	}
	if status, _ := res[0].(string); status == "mismatch" {
		other := ""
		if len(res) > 1 {
			other, _ = res[1].(string)
		}
		r.stats.prefixMismatches.Add(1)
		return fmt.Errorf("%w: fleet roll %q holds live instances with Prefix %q, this one has %q",
			ErrPrefixMismatch, r.opts.FleetKey, other, r.opts.Prefix)
	}
	return nil
}

// fleetLoop renews this instance's entry in the fleet roll every FleetInterval. A renewal
// that finds another prefix live (the roll lost this fleet's entries, for example in a
// failover, and another fleet enrolled meanwhile) is logged and counted in
// Stats.PrefixMismatches; the instance keeps serving.
func (r *Replicator) fleetLoop() {
	defer r.wg.Done()
	tick := time.NewTicker(r.opts.FleetInterval)
	defer tick.Stop()
	for {
		select {
		case <-r.lifetime.Done():
			return
		case <-tick.C:
		}
		// Not cut short by Close: a renewal still running when Close removes the entry would
		// write it back (Close waits for this loop, then removes it).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.lifetime), 5*time.Second)
		if err := r.enroll(ctx); err != nil && r.opts.Logger != nil && r.lifetime.Err() == nil {
			r.opts.Logger.Error("replicas: fleet roll renewal failed", "err", err)
		}
		cancel()
	}
}

// kickRefresh asks the refresher for an early reload; it never blocks.
func (r *Replicator) kickRefresh() {
	select {
	case r.refreshCh <- struct{}{}:
	default:
	}
}

// errEmptyKey is returned for an empty logical key.
var errEmptyKey = fmt.Errorf("%w: key must not be empty", ErrInvalid)

// checkTTL validates a call's ttl and applies Options.DefaultTTL to 0.
func (r *Replicator) checkTTL(ttl time.Duration) (time.Duration, error) {
	switch {
	case ttl == 0:
		return r.opts.DefaultTTL, nil
	case ttl < time.Millisecond:
		return 0, fmt.Errorf("%w: ttl must be 0 (Options.DefaultTTL) or at least 1ms, got %v", ErrInvalid, ttl)
	}
	return ttl, nil
}

// IsHot reports whether key is currently replicated by this instance: a Promote or Demote
// decides, otherwise Options.Hot, otherwise Options.IsHot.
func (r *Replicator) IsHot(key string) bool {
	r.mu.RLock()
	v, ok := r.override[key]
	r.mu.RUnlock()
	if ok {
		return v
	}
	if _, ok := r.hot[key]; ok {
		return true
	}
	return r.opts.IsHot != nil && r.opts.IsHot(key)
}

// Demote stops replicating key on this instance: its reads go to the logical key again.
// The copies are not deleted: writers keep them current while other instances' registrations
// last, then they expire with their TTL. ctx is accepted for symmetry with Promote; Demote
// does no I/O.
func (r *Replicator) Demote(_ context.Context, key string) error {
	if key == "" {
		return errEmptyKey
	}
	r.mu.Lock()
	r.override[key] = false
	r.mu.Unlock()
	return nil
}

// Promote starts replicating key on this instance. It first registers the copies of this
// instance's layout at the logical key and warms them from the logical key's current
// record (registration and read are one atomic step, so a write racing with the warm-up
// reaches the copies as well, and the older warm-up write cannot overwrite it). Only then
// do reads go to the copies, so promotion causes no misses and no source loads. If the
// logical key holds nothing, the key is marked hot and the copies are filled by the next
// Set or GetOrLoad. A warm-up failing on some copies returns a *PartialWriteError, and the
// key is hot anyway: reads fall back from the cold copies and refill them.
func (r *Replicator) Promote(ctx context.Context, key string) error {
	if key == "" {
		return errEmptyKey
	}
	lay, err := r.layoutFor(ctx, key)
	if err != nil {
		return err
	}
	var warmErr error
	rec, found, err := r.register(ctx, key, lay.add)
	if err != nil {
		return fmt.Errorf("replicas: promote %q: %w", key, err)
	}
	if found {
		all := make([]int, len(lay.keys))
		for i := range all {
			all[i] = i
		}
		expiry := r.copyExpiry(rec)
		targets := make([]target, 0, len(lay.keys))
		for _, i := range all {
			for _, e := range rec.reg {
				if e.slot == lay.slots[i] {
					targets = append(targets, target{index: i, key: lay.keys[i], expiry: expiry, until: e.expiry})
				}
			}
		}
		warmErr = r.writeCopies(ctx, key, rec, targets, 0)
		r.stats.promotions.Add(1)
	}
	r.mu.Lock()
	r.override[key] = true
	r.mu.Unlock()
	return warmErr
}
