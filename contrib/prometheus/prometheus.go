package celebrityprom

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/contrib/internal/statsmap"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/celebrity-go/celebrity/replicas"
	"github.com/celebrity-go/celebrity/routing"
	"github.com/celebrity-go/celebrity/stripes"
)

// Options configure one registration.
type Options struct {
	// Name, when set, is the constant label "name" of every series, to tell apart several
	// components of one kind in a process (two caches, say). It must be a small, fixed set
	// of values chosen by the host: never a key or a tenant.
	Name string
}

// ErrInvalid is wrapped by every error about a bad argument.
var ErrInvalid = errors.New("celebrityprom: invalid argument")

// Namespace is the first part of every metric name.
const Namespace = "celebrity"

// L1Cache registers with reg a collector that reads c.Stats() (a *l1cache.Cache of any
// value type) on every scrape, and returns it (for Unregister). For load latency, register
// a LoadDurations collector and add its OnEvent to the cache's options.
func L1Cache(reg prometheus.Registerer, c interface{ Stats() l1cache.Stats }, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.L1Cache, func() any { return c.Stats() }, c != nil, o)
}

// Invalidator registers a collector of inv.Stats() of an *l1cache.Invalidator.
func Invalidator(reg prometheus.Registerer, inv interface {
	Stats() l1cache.InvalidatorStats
}, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.Invalidator, func() any { return inv.Stats() }, inv != nil, o)
}

// Replicas registers a collector of r.Stats() of a *replicas.Replicator. CopyReads becomes
// one series per copy index in use (label "copy"): none before a copy was read, as on a
// standalone server, then up to the highest index read (at most Options.Copies).
func Replicas(reg prometheus.Registerer, r interface{ Stats() replicas.Stats }, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.Replicas, func() any { return r.Stats() }, r != nil, o)
}

// Stripes registers a collector of c.Stats() of a *stripes.Counter. StripeWrites becomes
// the gauges celebrity_stripes_generation (the newest generation this process wrote to) and
// celebrity_stripes_stripe_writes, that generation's applied events per stripe (label
// "stripe", at most the counter's stripe count).
func Stripes(reg prometheus.Registerer, c interface{ Stats() stripes.Stats }, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.Stripes, func() any { return c.Stats() }, c != nil, o)
}

// StripesReader registers a collector of r.Stats() of a *stripes.Reader.
func StripesReader(reg prometheus.Registerer, r interface {
	Stats() stripes.ReaderStats
}, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.StripesReader, func() any { return r.Stats() }, r != nil, o)
}

// StripesFamily registers a collector of f.Stats() of a *stripes.Family. No counter name is
// ever a label: the family's counts are added over its names.
func StripesFamily(reg prometheus.Registerer, f interface {
	Stats() stripes.FamilyStats
}, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.StripesFamily, func() any { return f.Stats() }, f != nil, o)
}

// Escrow registers a collector of l.Stats() of an *escrow.Central or *escrow.Pool.
func Escrow(reg prometheus.Registerer, l interface{ Stats() escrow.Stats }, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.Escrow, func() any { return l.Stats() }, l != nil, o)
}

// Routing registers a collector of r.Stats() of a *routing.Router.
func Routing(reg prometheus.Registerer, r interface{ Stats() routing.Stats }, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.Routing, func() any { return r.Stats() }, r != nil, o)
}

// Migrate registers a collector of c.Stats() of a *migrate.Coordinator. LastPause becomes
// the gauge celebrity_migrate_last_pause_seconds.
func Migrate(reg prometheus.Registerer, c interface{ Stats() migrate.Stats }, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.Migrate, func() any { return c.Stats() }, c != nil, o)
}

// Hotkeys registers a collector of d.Stats() of a *hotkeys.Detector. No key is ever a
// label.
func Hotkeys(reg prometheus.Registerer, d interface{ Stats() hotkeys.Stats }, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.Hotkeys, func() any { return d.Stats() }, d != nil, o)
}

// Cache registers a collector of c.Stats() of a *celebrity.Cache (of any value type): its
// own counters as celebrity_cache_<field>, and its parts' under the part's name
// (celebrity_cache_l1_hits_total, celebrity_cache_replicas_copy_reads_total with the label
// "copy" for the copies in use only, celebrity_cache_invalidator_published_total).
func Cache(reg prometheus.Registerer, c interface{ Stats() celebrity.Stats }, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.Cache, func() any { return c.Stats() }, c != nil, o)
}

// Ratelimit registers a collector of l.Stats() of a *ratelimit.Limiter. No key is ever a
// label.
func Ratelimit(reg prometheus.Registerer, l interface{ Stats() ratelimit.Stats }, o Options) (prometheus.Collector, error) {
	return register(reg, statsmap.Ratelimit, func() any { return l.Stats() }, l != nil, o)
}

// collector reads a component's stats once per scrape.
type collector struct {
	comp  statsmap.Component
	read  func() any
	descs map[string]*prometheus.Desc
	types map[string]prometheus.ValueType
	order []string
}

func register(reg prometheus.Registerer, comp statsmap.Component, read func() any, ok bool, o Options) (prometheus.Collector, error) {
	if reg == nil || !ok {
		return nil, fmt.Errorf("%w: %s: the registerer and the component must not be nil", ErrInvalid, comp.Pkg)
	}
	c := &collector{comp: comp, read: read, descs: map[string]*prometheus.Desc{}, types: map[string]prometheus.ValueType{}}
	var constLabels prometheus.Labels
	if o.Name != "" {
		constLabels = prometheus.Labels{"name": o.Name}
	}
	for _, mi := range comp.Metrics(read()) {
		name := Namespace + "_" + strings.ReplaceAll(comp.Pkg, ".", "_") + "_" + mi.Name
		vt := prometheus.GaugeValue
		switch {
		case mi.Seconds:
			name += "_seconds"
		case mi.Kind == statsmap.Counter:
			name += "_total"
			vt = prometheus.CounterValue
		}
		var labels []string
		if mi.Label != "" {
			labels = []string{mi.Label}
		}
		c.descs[mi.Name] = prometheus.NewDesc(name, fmt.Sprintf("%s.%s (see that field's documentation).", comp.Type, mi.Field), labels, constLabels)
		c.types[mi.Name] = vt
		c.order = append(c.order, mi.Name)
	}
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("celebrityprom: %s: %w", comp.Pkg, err)
	}
	return c, nil
}

// Describe sends every metric's description.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, n := range c.order {
		ch <- c.descs[n]
	}
}

// Collect reads the stats once and sends every value.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.comp.Samples(c.read()) {
		d, ok := c.descs[s.Name]
		if !ok {
			continue
		}
		var labels []string
		if s.LabelValue != "" {
			labels = []string{s.LabelValue}
		}
		ch <- prometheus.MustNewConstMetric(d, c.types[s.Name], s.Value, labels...)
	}
}

// LoadDurations is a histogram of l1cache load durations,
// celebrity_l1cache_load_duration_seconds, labelled "outcome" ("ok", "not_found",
// "error"). Register it once and pass its OnEvent to l1cache.Options.OnEvent (chained with
// a hook of the host's own if it has one).
type LoadDurations struct {
	h *prometheus.HistogramVec
}

// NewLoadDurations registers a LoadDurations with reg.
func NewLoadDurations(reg prometheus.Registerer, o Options) (*LoadDurations, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: l1cache: the registerer must not be nil", ErrInvalid)
	}
	var constLabels prometheus.Labels
	if o.Name != "" {
		constLabels = prometheus.Labels{"name": o.Name}
	}
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:        Namespace + "_l1cache_load_duration_seconds",
		Help:        "Duration of l1cache loader calls (l1cache.Event.Duration of EventLoad).",
		Buckets:     []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		ConstLabels: constLabels,
	}, []string{"outcome"})
	if err := reg.Register(h); err != nil {
		return nil, fmt.Errorf("celebrityprom: l1cache load durations: %w", err)
	}
	return &LoadDurations{h: h}, nil
}

// OnEvent records an EventLoad's duration and ignores every other event. It does not block.
func (l *LoadDurations) OnEvent(e l1cache.Event) {
	if e.Kind != l1cache.EventLoad {
		return
	}
	outcome := "ok"
	switch {
	case errors.Is(e.Err, l1cache.ErrNotFound):
		outcome = "not_found"
	case e.Err != nil:
		outcome = "error"
	}
	l.h.WithLabelValues(outcome).Observe(e.Duration.Seconds())
}
