package stripes

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [FamilyOptions].
const (
	// DefaultMaxNames is FamilyOptions.MaxNames when zero.
	DefaultMaxNames = 10_000
	// DefaultIdleAfter is FamilyOptions.IdleAfter when zero.
	DefaultIdleAfter = 10 * time.Minute
	// DefaultFamilyInterval is FamilyOptions.Interval when zero.
	DefaultFamilyInterval = time.Second
	// DefaultFamilyStaleness is FamilyOptions.MaxStaleness when zero.
	DefaultFamilyStaleness = time.Second
	// DefaultCoolAfter is FamilyOptions.CoolAfter when zero.
	DefaultCoolAfter = time.Minute
	// sumWorkers bounds the concurrent Sums of one SumMany.
	sumWorkers = 8
)

// HotDetector reports whether a counter name is hot, for hosts that already measure it (a
// hot-key detector). A [Family] given one promotes a name it reports hot and demotes it
// once it is reported cold and the family's own measure is below FamilyOptions.CoolRate.
type HotDetector interface {
	IsHot(name string) bool
}

// FamilyOptions configure a [Family].
type FamilyOptions struct {
	// Counter holds the options every name of the family shares. Counter.Name must be
	// empty: names are given per call and validated as Options.Name. Counter.Stripes is the
	// stripe count of a new name; zero means 1, so that a cold name costs one hash (its home
	// record, see the package doc) and its reads no fan-out. Counter.SealInterval is how
	// often the family's loop seals a name that has old generations (default
	// DedupWindow/4; negative: on every round); names have no loop of their own.
	Counter Options
	// MaxNames bounds the names whose Counter (cached layout) and cached sum are kept in
	// memory; the least recently used name is dropped first. Default: 10,000.
	MaxNames int
	// IdleAfter drops a name from memory once it was not used for this long. Default: 10m.
	IdleAfter time.Duration
	// Interval is how often the family's loop runs: it measures write rates, promotes and
	// demotes names, seals old generations of names that have them, and drops idle names.
	// Negative disables the loop (call [Family.Tick] yourself). Default: 1s.
	Interval time.Duration
	// MaxStaleness is the oldest sum [Family.Sum] and [Family.SumMany] return from their
	// cache. Negative disables the cache. Default: 1s.
	MaxStaleness time.Duration
	// HotStripes is the stripe count a hot name is promoted to. Zero disables adaptive
	// striping; otherwise 2..4096 and more than Counter.Stripes.
	HotStripes int
	// HotRate is the write rate (Add calls per second through this family, measured over
	// one Interval) at or above which a name is promoted. Zero means no measured promotion
	// (only Detector promotes).
	HotRate float64
	// CoolRate is the write rate below which a promoted name counts as cooling; a name
	// cooling for CoolAfter is demoted back to Counter.Stripes, by a family that saw it hot
	// (so that a process with a small share of a hot name's writes does not demote what
	// another process promotes). Default: HotRate/10. With
	// HotRate and CoolRate both zero, a name cools as soon as Detector no longer reports it.
	CoolRate float64
	// CoolAfter is how long a promoted name must stay cool before it is demoted.
	// Default: 1m.
	CoolAfter time.Duration
	// Detector, if set, promotes the names it reports hot (see [HotDetector]).
	Detector HotDetector
}

// Family is a set of counters that share options: per-item counters (views per post). It
// keeps one Counter per name in use, bounded by MaxNames and IdleAfter, and one
// background loop for all of them. Every name is an ordinary counter (its own layout record
// and generations), so everything the package doc says of a Counter holds for each name,
// including across promotion and demotion, which are Resizes. Family is safe for concurrent
// use; several families (in several processes) may share names.
type Family struct {
	client Client
	opts   FamilyOptions
	copts  Options
	// sealEvery is how often a name with old generations is sealed.
	sealEvery time.Duration

	mu      sync.Mutex
	names   map[string]*list.Element // of *familyMember
	lru     list.List                // front: most recently used
	unseal  map[string]time.Time     // dropped names that still had old generations: last seal
	stop    chan struct{}
	done    sync.WaitGroup
	once    sync.Once
	lastRun time.Time
	stats   familyStats
}

// familyMember is one name in memory.
type familyMember struct {
	name   string
	c      *Counter
	used   time.Time // under Family.mu
	writes atomic.Int64
	// The fields below are under Family.mu.
	sum       int64
	sumAt     time.Time // when the read that gave sum began
	sumOK     bool
	servedAt  time.Time // when sum was last returned to a caller
	coolSince time.Time
	lastSeal  time.Time
	sawHot    bool // this family measured (or was told) the name hot while it held it
}

// NewFamily returns a Family on client. It does no I/O. Unless o.Interval is negative it
// starts the family's background loop; Close stops it.
func NewFamily(client Client, o FamilyOptions) (*Family, error) {
	if client == nil {
		return nil, invalidf("client must not be nil")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	sealEvery := max(o.Counter.SealInterval, 0)
	copts := o.Counter
	copts.SealInterval = -1
	f := &Family{client: client, opts: o, copts: copts, sealEvery: sealEvery, names: map[string]*list.Element{}, unseal: map[string]time.Time{}, stop: make(chan struct{})}
	f.lastRun = copts.Clock()
	if o.Interval > 0 {
		f.done.Add(1)
		go f.loop()
	}
	return f, nil
}

// withDefaults validates o and fills its zero fields; o.Counter is filled as
// Options.withDefaults would for any name (its Name stays empty, Stripes defaults to 1).
func (o FamilyOptions) withDefaults() (FamilyOptions, error) {
	if o.Counter.Name != "" {
		return o, invalidf("FamilyOptions.Counter.Name must be empty (names are given per call), got %q", o.Counter.Name)
	}
	if o.Counter.Stripes == 0 {
		o.Counter.Stripes = 1
	}
	probe := o.Counter
	probe.Name = "family"
	copts, err := probe.withDefaults()
	if err != nil {
		return o, err
	}
	copts.Name = ""
	o.Counter = copts
	if o.MaxNames == 0 {
		o.MaxNames = DefaultMaxNames
	}
	if o.MaxNames < 1 {
		return o, invalidf("FamilyOptions.MaxNames must be at least 1, got %d", o.MaxNames)
	}
	if o.IdleAfter == 0 {
		o.IdleAfter = DefaultIdleAfter
	}
	if o.IdleAfter < 0 {
		return o, invalidf("FamilyOptions.IdleAfter must not be negative, got %v", o.IdleAfter)
	}
	if o.Interval == 0 {
		o.Interval = DefaultFamilyInterval
	}
	if o.MaxStaleness == 0 {
		o.MaxStaleness = DefaultFamilyStaleness
	}
	return o.withRateDefaults()
}

// withRateDefaults validates and fills the adaptive striping options: HotStripes, HotRate,
// CoolRate and CoolAfter.
func (o FamilyOptions) withRateDefaults() (FamilyOptions, error) {
	if o.HotStripes != 0 && (o.HotStripes <= o.Counter.Stripes || o.HotStripes > MaxStripes) {
		return o, invalidf("FamilyOptions.HotStripes must be 0 or %d..%d (more than Counter.Stripes), got %d", o.Counter.Stripes+1, MaxStripes, o.HotStripes)
	}
	if o.HotRate < 0 || o.CoolRate < 0 {
		return o, invalidf("FamilyOptions.HotRate and CoolRate must not be negative, got %v and %v", o.HotRate, o.CoolRate)
	}
	if o.CoolRate == 0 {
		o.CoolRate = o.HotRate / 10
	}
	if o.CoolRate > o.HotRate && o.HotRate > 0 {
		return o, invalidf("FamilyOptions.CoolRate must not exceed HotRate (%v), got %v", o.HotRate, o.CoolRate)
	}
	if o.CoolAfter == 0 {
		o.CoolAfter = DefaultCoolAfter
	}
	if o.CoolAfter < 0 {
		return o, invalidf("FamilyOptions.CoolAfter must not be negative, got %v", o.CoolAfter)
	}
	return o, nil
}

// Close stops the background loop and waits for it. It does not close the client. The
// Family stays usable.
func (f *Family) Close() error {
	f.once.Do(func() { close(f.stop) })
	f.done.Wait()
	return nil
}

// member returns the in-memory member of name, creating it (no I/O) if needed.
func (f *Family) member(name string) (*familyMember, error) {
	if err := checkName("counter name", name); err != nil {
		return nil, err
	}
	now := f.copts.Clock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.names[name]; ok {
		m := e.Value.(*familyMember)
		m.used = now
		f.lru.MoveToFront(e)
		return m, nil
	}
	o := f.copts
	o.Name = name
	if _, err := o.withDefaults(); err != nil {
		return nil, err
	}
	c := &Counter{client: f.client, opts: o, keys: keys{prefix: o.Prefix, name: name}, stop: make(chan struct{})}
	m := &familyMember{name: name, c: c, used: now}
	f.names[name] = f.lru.PushFront(m)
	for f.lru.Len() > f.opts.MaxNames {
		f.dropLocked(f.lru.Back())
	}
	return m, nil
}

// dropLocked forgets a member; a name with old generations is remembered for sealing.
func (f *Family) dropLocked(e *list.Element) {
	m := e.Value.(*familyMember)
	f.lru.Remove(e)
	delete(f.names, m.name)
	f.stats.retire(m.c)
	if l := m.c.layout.Load(); l != nil && len(l.doc.Gens) > 1 {
		f.unseal[m.name] = m.lastSeal
	}
}

// Add counts ev once in the counter name, as [Counter.Add].
func (f *Family) Add(ctx context.Context, name string, ev Event, delta int64) (Result, error) {
	m, err := f.member(name)
	if err != nil {
		return Result{}, err
	}
	m.writes.Add(1)
	return m.c.Add(ctx, ev, delta)
}

// FamilyAddition is one event of [Family.AddBatch]: its counter name, event and delta.
type FamilyAddition struct {
	Name  string
	Event Event
	Delta int64
}

// AddBatch counts events of many names in one pipeline (split per master by a cluster
// client), with the per-addition results and errors of [Counter.AddBatch]. A name this
// family has not used yet first costs one read of its layout record (and its creation if
// it is new).
func (f *Family) AddBatch(ctx context.Context, adds []FamilyAddition) ([]Result, []error) {
	counters := make([]*Counter, len(adds))
	plain := make([]Addition, len(adds))
	var bad []int
	var errs0 []error
	for k, a := range adds {
		m, err := f.member(a.Name)
		if err != nil {
			bad, errs0 = append(bad, k), append(errs0, err)
			continue
		}
		m.writes.Add(1)
		counters[k], plain[k] = m.c, Addition{Event: a.Event, Delta: a.Delta}
	}
	if len(bad) == 0 {
		return addBatch(ctx, f.client, counters, plain)
	}
	// Run the valid ones and put the refused ones back in place.
	var idx []int
	var cs []*Counter
	var as []Addition
	for k := range adds {
		if counters[k] != nil {
			idx, cs, as = append(idx, k), append(cs, counters[k]), append(as, plain[k])
		}
	}
	results, errs := make([]Result, len(adds)), make([]error, len(adds))
	rs, es := addBatch(ctx, f.client, cs, as)
	for j, k := range idx {
		results[k], errs[k] = rs[j], es[j]
	}
	for j, k := range bad {
		errs[k] = errs0[j]
	}
	return results, errs
}

// Sum returns the value of the counter name, as [Counter.Sum], or a cached value no older
// than MaxStaleness (measured from the start of the read that gave it). As with
// [Counter.Sum], with positive deltas only the sums one caller reads one after the other
// never decrease, cached or not.
func (f *Family) Sum(ctx context.Context, name string) (int64, error) {
	m, err := f.member(name)
	if err != nil {
		return 0, err
	}
	now := f.copts.Clock()
	if f.opts.MaxStaleness > 0 {
		f.mu.Lock()
		v, ok := m.sum, m.sumOK && now.Sub(m.sumAt) < f.opts.MaxStaleness
		if ok {
			m.servedAt = f.copts.Clock()
		}
		f.mu.Unlock()
		if ok {
			f.stats.cachedSums.Add(1)
			return v, nil
		}
	}
	v, err := m.c.Sum(ctx)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	m.cacheSum(v, now, f.copts.Clock())
	f.mu.Unlock()
	return v, nil
}

// cacheSum offers the cache the sum v of a read begun at start and returned at done. It
// replaces the cached sum when that one was never returned to a caller, when v is not
// smaller, or when the read began after the cached sum was last returned: a read begun
// earlier may have counted less than a caller was already given (a concurrent Sum
// overtook it), and caching it would make that caller's next Sum go back. Under Family.mu.
func (m *familyMember) cacheSum(v int64, start, done time.Time) {
	if !m.sumOK || v >= m.sum || start.After(m.servedAt) {
		m.sum, m.sumAt, m.sumOK = v, start, true
		m.servedAt = done
	}
}

// SumMany returns the values of many counters, as Sum each (cached values served from
// memory, the others read with up to 8 concurrent Sums), with one error per name.
func (f *Family) SumMany(ctx context.Context, names []string) ([]int64, []error) {
	sums, errs := make([]int64, len(names)), make([]error, len(names))
	sem := make(chan struct{}, sumWorkers)
	var wg sync.WaitGroup
	for k, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sums[k], errs[k] = f.Sum(ctx, name)
		})
	}
	wg.Wait()
	return sums, errs
}

// Resize changes the stripe count of name, as [Counter.Resize]. Adaptive striping does the
// same; a name resized by hand is demoted by the loop only if HotStripes is set.
func (f *Family) Resize(ctx context.Context, name string, n int) (uint64, error) {
	m, err := f.member(name)
	if err != nil {
		return 0, err
	}
	return m.c.Resize(ctx, n)
}

// Names returns the number of names held in memory.
func (f *Family) Names() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lru.Len()
}

// loop runs Tick every Interval until Close.
func (f *Family) loop() {
	defer f.done.Done()
	t := time.NewTicker(f.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		if err := f.Tick(context.Background()); err != nil {
			f.copts.Logger.Warn("stripes: family round failed", "err", err)
		}
	}
}

// Tick runs one round of the family's loop: it drops names idle for IdleAfter, promotes
// and demotes names (if HotStripes is set) by the writes counted since the previous Tick,
// and seals old generations of names that have them (at most once per
// Counter.SealInterval per name, default DedupWindow/4). Each step is bounded by
// Counter.OpTimeout. It returns the first error met; the round goes on past it.
func (f *Family) Tick(ctx context.Context) error {
	now := f.copts.Clock()
	elapsed, members, dropped := f.startRound(now)
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, m := range members {
		writes := m.writes.Swap(0)
		if f.opts.HotStripes > 0 {
			note(f.adapt(ctx, m, writes, elapsed, now))
		}
		if l := m.c.layout.Load(); l != nil && len(l.doc.Gens) > 1 && f.sealDue(&m.lastSeal, now) {
			f.stats.seals.Add(1)
			note(f.step(ctx, func(ctx context.Context) error { _, err := m.c.Seal(ctx); return err }))
		}
	}
	for _, name := range dropped {
		f.stats.seals.Add(1)
		note(f.sealDropped(ctx, name))
	}
	if first != nil {
		f.stats.roundErrors.Add(1)
	}
	return first
}

// startRound begins a round at now: it drops the names idle for IdleAfter and returns the
// time since the previous round, the names held (most recently used first) and the dropped
// names with old generations whose seal is due.
func (f *Family) startRound(now time.Time) (elapsed time.Duration, members []*familyMember, dropped []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	elapsed = now.Sub(f.lastRun)
	f.lastRun = now
	for e := f.lru.Back(); e != nil; {
		prev := e.Prev()
		if now.Sub(e.Value.(*familyMember).used) < f.opts.IdleAfter {
			break
		}
		f.dropLocked(e)
		e = prev
	}
	members = make([]*familyMember, 0, f.lru.Len())
	for e := f.lru.Front(); e != nil; e = e.Next() {
		members = append(members, e.Value.(*familyMember))
	}
	for name, last := range f.unseal {
		if now.Sub(last) >= f.sealEvery {
			dropped = append(dropped, name)
			f.unseal[name] = now
		}
	}
	return elapsed, members, dropped
}

// sealDue reports whether a seal last run at *last is due at now, and if so records now.
func (f *Family) sealDue(last *time.Time, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(*last) < f.sealEvery {
		return false
	}
	*last = now
	return true
}

// sealDropped seals the old generations of a name dropped from memory, with a Counter of
// its own for this one call, and forgets the name once it has a single generation left.
func (f *Family) sealDropped(ctx context.Context, name string) error {
	o := f.copts
	o.Name = name
	c := &Counter{client: f.client, opts: o, keys: keys{prefix: o.Prefix, name: name}, stop: make(chan struct{})}
	err := f.step(ctx, func(ctx context.Context) error { _, err := c.Seal(ctx); return err })
	if l := c.layout.Load(); err == nil && (l == nil || len(l.doc.Gens) == 1) {
		f.mu.Lock()
		delete(f.unseal, name)
		f.mu.Unlock()
	}
	return err
}

// heat classifies a name by its measured write rate and by the detector: hot names are
// promoted; a name that stays cool for CoolAfter is demoted by a family that saw it hot.
// With HotRate and CoolRate both zero, a name is cool as soon as the detector no longer
// reports it.
func (o FamilyOptions) heat(rate float64, detected bool) (hot, cool bool) {
	hot = detected || (o.HotRate > 0 && rate >= o.HotRate)
	cool = !detected && (rate < o.CoolRate || o.HotRate == 0 && o.CoolRate == 0)
	return hot, cool
}

// adapt promotes or demotes m by its writes over elapsed.
func (f *Family) adapt(ctx context.Context, m *familyMember, writes int64, elapsed time.Duration, now time.Time) error {
	if elapsed <= 0 {
		return nil
	}
	hot, cool := f.opts.heat(float64(writes)/elapsed.Seconds(), f.opts.Detector != nil && f.opts.Detector.IsHot(m.name))
	l := m.c.layout.Load()
	if l == nil {
		if !hot {
			return nil
		}
		var err error
		if err = f.step(ctx, func(ctx context.Context) error { l, err = m.c.ensureLayout(ctx); return err }); err != nil {
			return err
		}
	}
	stripes := l.current().Stripes
	f.mu.Lock()
	m.sawHot = m.sawHot || hot
	if !cool || !m.sawHot || stripes <= f.copts.Stripes {
		m.coolSince = time.Time{}
	} else if m.coolSince.IsZero() {
		m.coolSince = now
	}
	demote := !m.coolSince.IsZero() && now.Sub(m.coolSince) >= f.opts.CoolAfter
	f.mu.Unlock()
	switch {
	case hot && stripes < f.opts.HotStripes:
		err := f.step(ctx, func(ctx context.Context) error { _, err := m.c.Resize(ctx, f.opts.HotStripes); return err })
		if err == nil {
			f.stats.promotions.Add(1)
		}
		return err
	case demote:
		err := f.step(ctx, func(ctx context.Context) error { _, err := m.c.Resize(ctx, f.copts.Stripes); return err })
		if err == nil {
			f.stats.demotions.Add(1)
			f.mu.Lock()
			m.coolSince, m.sawHot = time.Time{}, false
			f.mu.Unlock()
		}
		return err
	}
	return nil
}

// step runs fn with a context bounded by OpTimeout.
func (f *Family) step(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, f.copts.OpTimeout)
	defer cancel()
	return fn(ctx)
}
