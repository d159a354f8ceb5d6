package routing

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sync/singleflight"

	"github.com/celebrity-go/celebrity/internal/hashing"
)

// Router routes tenants by the newest table it has seen and keeps it current from the
// control Redis (pub/sub plus a periodic poll) in one background goroutine, stopped by
// Close. Route is pure and in-memory; Do and Get add the shard-side guard and the
// stale-route protocol. A Router is safe for concurrent use.
type Router struct {
	store  *Store
	shards map[string]*Shard
	o      Options

	cur            atomic.Pointer[compiled]
	sf             singleflight.Group
	starts         atomic.Uint64 // fetches started
	done           atomic.Uint64 // highest start number of a completed fetch
	waiters        atomic.Int64
	lastFetchNanos atomic.Int64
	lastErr        atomic.Pointer[error]

	mu     sync.Mutex
	signal chan struct{} // closed and replaced when a fetch completes

	load        *loadCounter  // nil unless Options.Load.Enabled
	loadStopped chan struct{} // closed when the load loop ends (at once without one)

	stats    stats
	stop     context.CancelFunc
	stopped  chan struct{}
	closing  chan struct{}
	closeOne sync.Once
}

// Route is where one tenant's key goes under one table generation.
type Route struct {
	Unit       Unit   // Unit is the placement unit; Unit.Kind tells hash, override or spread.
	Shard      *Shard // Shard is the owner of Unit in this generation.
	Generation uint64 // Generation is the table generation the route comes from.
}

// compiled is an installed table in the form Route reads.
type compiled struct {
	table     *Table
	gen       uint64
	buckets   uint64
	owner     []*Shard // by bucket
	special   *[specialWords]uint64
	overrides map[string]*Shard
	spreads   map[string][]*Shard
}

// New returns a Router over the control Redis client and starts its watcher. It does no I/O
// before returning: until the first table arrives, Route returns ErrNoTable and Do and Get
// wait for it (see [Router.Await]). Bad options give an error wrapping ErrInvalid that
// names the field.
func New(control Control, o Options) (*Router, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	store, err := NewStore(control, StoreOptions{Prefix: o.Prefix})
	if err != nil {
		return nil, err
	}
	r := &Router{store: store, shards: make(map[string]*Shard, len(o.Shards)), o: o,
		signal: make(chan struct{}), stopped: make(chan struct{}), closing: make(chan struct{}),
		loadStopped: make(chan struct{})}
	so := o.Shard
	so.Prefix = o.Prefix
	for name, c := range o.Shards {
		s, err := NewShard(name, c, so)
		if err != nil {
			return nil, err
		}
		r.shards[name] = s
	}
	store.shards = r.shards
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go r.watch(ctx, control)
	if o.Load.Enabled {
		r.load = newLoadCounter(o.Load.Capacity)
		go r.loadLoop(ctx)
	} else {
		close(r.loadStopped)
	}
	return r, nil
}

// Close stops the watcher (and the load summary's publisher) and waits for them. Calls
// waiting for a table return ErrClosed. Counts of the load interval under way are not
// published.
func (r *Router) Close() error {
	r.closeOne.Do(func() {
		close(r.closing)
		r.stop()
	})
	<-r.stopped
	<-r.loadStopped
	return nil
}

// Shard returns the shard named name, or nil.
func (r *Router) Shard(name string) *Shard { return r.shards[name] }

// Store returns the router's table store.
func (r *Router) Store() *Store { return r.store }

// Table returns a copy of the installed table, or nil before the first.
func (r *Router) Table() *Table {
	if c := r.cur.Load(); c != nil {
		return c.table.Clone()
	}
	return nil
}

// Generation returns the installed table's generation, 0 before the first.
func (r *Router) Generation() uint64 {
	if c := r.cur.Load(); c != nil {
		return c.gen
	}
	return 0
}

var (
	errEmptyTenant   = fmt.Errorf("%w: empty tenant", ErrInvalid)
	errInvalidTenant = fmt.Errorf("%w: tenant must be valid UTF-8 (a table stores it as JSON text, which cannot carry other bytes losslessly)", ErrInvalid)
)

// checkTenant refuses an empty tenant, one longer than MaxTenantLen bytes and one that is
// not valid UTF-8. It does not allocate for a good tenant.
func checkTenant(tenant string) error {
	if tenant == "" {
		return errEmptyTenant
	}
	if len(tenant) > MaxTenantLen {
		return fmt.Errorf("%w: %s", ErrInvalid, tenantProblem(tenant))
	}
	if !utf8.ValidString(tenant) {
		return errInvalidTenant
	}
	return nil
}

// Route returns where tenant's record key goes under the installed table: the override if the
// tenant has one, else the sub-bucket xxhash64(key) % K if the tenant is spread over K,
// else bucket xxhash64(tenant) % B. key only matters for spread tenants. Route does no I/O
// and does not allocate; it returns ErrNoTable before the first table and an ErrInvalid
// error for an empty tenant.
func (r *Router) Route(tenant, key string) (Route, error) {
	if err := checkTenant(tenant); err != nil {
		return Route{}, err
	}
	c := r.cur.Load()
	if c == nil {
		return Route{}, ErrNoTable
	}
	h := hashing.Sum64(tenant)
	if c.special[(h>>6)&specialMask]&(1<<(h&63)) != 0 {
		if s, ok := c.overrides[tenant]; ok {
			r.stats.routesOverride.add(h)
			return Route{Unit: Unit{Kind: KindTenant, Tenant: tenant}, Shard: s, Generation: c.gen}, nil
		}
		if ss, ok := c.spreads[tenant]; ok {
			sub := hashing.Bucket(key, uint64(len(ss)))
			r.stats.routesSpread.add(h ^ sub)
			return Route{Unit: Unit{Kind: KindSpread, Tenant: tenant, Sub: uint32(sub)}, Shard: ss[sub], Generation: c.gen}, nil
		}
	}
	b := h % c.buckets
	r.stats.routesHash.add(h)
	return Route{Unit: Unit{Kind: KindBucket, Bucket: uint32(b)}, Shard: c.owner[b], Generation: c.gen}, nil
}

// specialWords sizes the filter of overridden and spread tenants: a bit per (hash % 65536),
// so that Route skips both map lookups for almost every other tenant.
const (
	specialWords = 1024
	specialMask  = specialWords - 1
)

// compile checks t against the router's shards and builds its routing form.
func (r *Router) compile(t *Table) (*compiled, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	c := &compiled{table: t, gen: t.Generation, buckets: uint64(t.Buckets), owner: make([]*Shard, t.Buckets),
		special: new([specialWords]uint64)}
	res := resolver{shards: r.shards, gen: t.Generation}
	for _, rg := range t.Ranges {
		s := res.shard(rg.Shard)
		for b := rg.First; b <= rg.Last; b++ {
			c.owner[b] = s
		}
	}
	if len(t.Overrides) > 0 {
		c.overrides = make(map[string]*Shard, len(t.Overrides))
		for tenant, name := range t.Overrides {
			c.overrides[tenant] = res.shard(name)
			c.mark(tenant)
		}
	}
	if len(t.Spreads) > 0 {
		c.spreads = make(map[string][]*Shard, len(t.Spreads))
		for tenant, names := range t.Spreads {
			ss := make([]*Shard, len(names))
			for i, name := range names {
				ss[i] = res.shard(name)
			}
			c.spreads[tenant] = ss
			c.mark(tenant)
		}
	}
	if res.err != nil {
		return nil, res.err
	}
	return c, nil
}

// mark sets tenant's bit in the filter of overridden and spread tenants.
func (c *compiled) mark(tenant string) {
	h := hashing.Sum64(tenant)
	c.special[(h>>6)&specialMask] |= 1 << (h & 63)
}

// resolver maps a table's shard names to the Router's shards; the first name the Router
// does not have is kept as err (and resolves to nil).
type resolver struct {
	shards map[string]*Shard
	gen    uint64
	err    error
}

func (res *resolver) shard(name string) *Shard {
	s, ok := res.shards[name]
	if !ok && res.err == nil {
		res.err = fmt.Errorf("%w: generation %d uses shard %q, which Options.Shards does not name",
			ErrInvalidTable, res.gen, name)
	}
	return s
}

// install makes t current if it is newer than the installed table; it reports whether it did.
func (r *Router) install(t *Table) (bool, error) {
	c, err := r.compile(t)
	if err != nil {
		return false, err
	}
	for {
		old := r.cur.Load()
		if old != nil && old.gen >= c.gen {
			if old.gen > c.gen {
				r.stats.ignoredOlder.Add(1)
			}
			return false, nil
		}
		// Counted before the table becomes current, so that a caller that saw its generation
		// reads the install in Stats; taken back when another install got there first.
		r.stats.installs.Add(1)
		if r.cur.CompareAndSwap(old, c) {
			if r.o.Logger != nil {
				r.o.Logger.Info("routing: installed table", "generation", c.gen)
			}
			if r.o.OnInstall != nil {
				r.o.OnInstall(t)
			}
			return true, nil
		}
		r.stats.installs.Add(^uint64(0))
	}
}
