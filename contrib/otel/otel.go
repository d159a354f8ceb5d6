package celebrityotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

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
	// Name, when set, is recorded as the attribute "celebrity.name" on every measurement,
	// to tell apart several components of one kind in a process (two caches, say). It must
	// be a small, fixed set of values chosen by the host: never a key or a tenant.
	Name string
}

// ErrInvalid is wrapped by every error about a bad argument.
var ErrInvalid = errors.New("celebrityotel: invalid argument")

// Namespace is the first part of every instrument name.
const Namespace = "celebrity"

// L1Cache registers instruments that read c.Stats() (a *l1cache.Cache of any value type)
// on every collection. For load latency, add LoadDurations' hook to the cache's OnEvent.
func L1Cache(m metric.Meter, c interface{ Stats() l1cache.Stats }, o Options) (metric.Registration, error) {
	return register(m, statsmap.L1Cache, func() any { return c.Stats() }, c != nil, o)
}

// Invalidator registers instruments that read inv.Stats() of an *l1cache.Invalidator.
func Invalidator(m metric.Meter, inv interface {
	Stats() l1cache.InvalidatorStats
}, o Options) (metric.Registration, error) {
	return register(m, statsmap.Invalidator, func() any { return inv.Stats() }, inv != nil, o)
}

// Replicas registers instruments that read r.Stats() of a *replicas.Replicator. CopyReads
// becomes one series per copy index in use (attribute "copy"): none before a copy was read,
// as on a standalone server, then up to the highest index read (at most Options.Copies).
func Replicas(m metric.Meter, r interface{ Stats() replicas.Stats }, o Options) (metric.Registration, error) {
	return register(m, statsmap.Replicas, func() any { return r.Stats() }, r != nil, o)
}

// Stripes registers instruments that read c.Stats() of a *stripes.Counter. StripeWrites
// becomes the gauge celebrity.stripes.generation (the newest generation this process wrote
// to) and celebrity.stripes.stripe_writes, that generation's applied events per stripe
// (attribute "stripe", at most the counter's stripe count).
func Stripes(m metric.Meter, c interface{ Stats() stripes.Stats }, o Options) (metric.Registration, error) {
	return register(m, statsmap.Stripes, func() any { return c.Stats() }, c != nil, o)
}

// StripesReader registers instruments that read r.Stats() of a *stripes.Reader.
func StripesReader(m metric.Meter, r interface {
	Stats() stripes.ReaderStats
}, o Options) (metric.Registration, error) {
	return register(m, statsmap.StripesReader, func() any { return r.Stats() }, r != nil, o)
}

// StripesFamily registers the instruments of f.Stats() of a *stripes.Family. No counter
// name is ever an attribute: the family's counts are added over its names.
func StripesFamily(m metric.Meter, f interface {
	Stats() stripes.FamilyStats
}, o Options) (metric.Registration, error) {
	return register(m, statsmap.StripesFamily, func() any { return f.Stats() }, f != nil, o)
}

// Escrow registers instruments that read l.Stats() of an *escrow.Central or *escrow.Pool.
func Escrow(m metric.Meter, l interface{ Stats() escrow.Stats }, o Options) (metric.Registration, error) {
	return register(m, statsmap.Escrow, func() any { return l.Stats() }, l != nil, o)
}

// Routing registers instruments that read r.Stats() of a *routing.Router.
func Routing(m metric.Meter, r interface{ Stats() routing.Stats }, o Options) (metric.Registration, error) {
	return register(m, statsmap.Routing, func() any { return r.Stats() }, r != nil, o)
}

// Migrate registers instruments that read c.Stats() of a *migrate.Coordinator. LastPause
// becomes the gauge celebrity.migrate.last_pause in seconds.
func Migrate(m metric.Meter, c interface{ Stats() migrate.Stats }, o Options) (metric.Registration, error) {
	return register(m, statsmap.Migrate, func() any { return c.Stats() }, c != nil, o)
}

// Hotkeys registers instruments that read d.Stats() of a *hotkeys.Detector. No key is
// ever an attribute.
func Hotkeys(m metric.Meter, d interface{ Stats() hotkeys.Stats }, o Options) (metric.Registration, error) {
	return register(m, statsmap.Hotkeys, func() any { return d.Stats() }, d != nil, o)
}

// Ratelimit registers instruments that read l.Stats() of a *ratelimit.Limiter. No key is
// ever an attribute.
func Ratelimit(m metric.Meter, l interface{ Stats() ratelimit.Stats }, o Options) (metric.Registration, error) {
	return register(m, statsmap.Ratelimit, func() any { return l.Stats() }, l != nil, o)
}

// Cache registers instruments that read c.Stats() of a *celebrity.Cache (of any value
// type): its own counters as celebrity.cache.<field>, and its parts' under the part's name
// (celebrity.cache.l1_hits, celebrity.cache.replicas_copy_reads with the attribute "copy",
// celebrity.cache.invalidator_published).
func Cache(m metric.Meter, c interface{ Stats() celebrity.Stats }, o Options) (metric.Registration, error) {
	return register(m, statsmap.Cache, func() any { return c.Stats() }, c != nil, o)
}

// register creates one observable instrument per metric of comp and a callback that reads
// the stats once per collection.
func register(m metric.Meter, comp statsmap.Component, read func() any, ok bool, o Options) (metric.Registration, error) {
	if m == nil || !ok {
		return nil, fmt.Errorf("%w: %s: the meter and the component must not be nil", ErrInvalid, comp.Pkg)
	}
	infos := comp.Metrics(read())
	ints, floats, all, err := instruments(m, comp, infos)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for _, mi := range infos {
		labels[mi.Name] = mi.Label
	}
	var base []attribute.KeyValue
	if o.Name != "" {
		base = append(base, attribute.String("celebrity.name", o.Name))
	}
	plain := metric.WithAttributes(base...)
	return m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		for _, s := range comp.Samples(read()) {
			opt := plain
			if l := labels[s.Name]; l != "" && s.LabelValue != "" {
				opt = metric.WithAttributes(append(base[:len(base):len(base)], attribute.String(l, s.LabelValue))...)
			}
			if f, ok := floats[s.Name]; ok {
				obs.ObserveFloat64(f, s.Value, opt)
			} else if i, ok := ints[s.Name]; ok {
				obs.ObserveInt64(i, int64(s.Value), opt)
			}
		}
		return nil
	}, all...)
}

// LoadDurations returns a hook for l1cache.Options.OnEvent that records every load's
// duration in the histogram celebrity.l1cache.load.duration (seconds), with the attribute
// "outcome": "ok", "not_found" or "error". Chain it with a hook of the host's own if it has
// one. The hook runs on the loading goroutine and does not block.
func LoadDurations(m metric.Meter, o Options) (func(l1cache.Event), error) {
	if m == nil {
		return nil, fmt.Errorf("%w: l1cache: the meter must not be nil", ErrInvalid)
	}
	h, err := m.Float64Histogram(Namespace+".l1cache.load.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of l1cache loader calls (l1cache.Event.Duration of EventLoad)"),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		return nil, fmt.Errorf("celebrityotel: %w", err)
	}
	var base []attribute.KeyValue
	if o.Name != "" {
		base = append(base, attribute.String("celebrity.name", o.Name))
	}
	opts := map[string]metric.RecordOption{}
	for _, outcome := range []string{"ok", "not_found", "error"} {
		opts[outcome] = metric.WithAttributes(append(base[:len(base):len(base)], attribute.String("outcome", outcome))...)
	}
	return func(e l1cache.Event) {
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
		h.Record(context.Background(), e.Duration.Seconds(), opts[outcome])
	}, nil
}

// instruments creates one observable instrument per metric of comp: a float gauge for a
// duration in seconds, otherwise an int counter, up-down counter or gauge by its kind.
func instruments(m metric.Meter, comp statsmap.Component, infos []statsmap.Metric) (map[string]metric.Int64Observable, map[string]metric.Float64Observable, []metric.Observable, error) {
	ints := map[string]metric.Int64Observable{}
	floats := map[string]metric.Float64Observable{}
	var all []metric.Observable
	for _, mi := range infos {
		name := Namespace + "." + comp.Pkg + "." + mi.Name
		desc := fmt.Sprintf("%s.%s (see that field's documentation)", comp.Type, mi.Field)
		var err error
		if mi.Seconds {
			var g metric.Float64ObservableGauge
			g, err = m.Float64ObservableGauge(name, metric.WithUnit(mi.Unit), metric.WithDescription(desc))
			floats[mi.Name] = g
			all = append(all, g)
		} else {
			var inst metric.Int64Observable
			switch mi.Kind {
			case statsmap.Counter:
				inst, err = m.Int64ObservableCounter(name, metric.WithUnit(mi.Unit), metric.WithDescription(desc))
			case statsmap.UpDown:
				inst, err = m.Int64ObservableUpDownCounter(name, metric.WithUnit(mi.Unit), metric.WithDescription(desc))
			default:
				inst, err = m.Int64ObservableGauge(name, metric.WithUnit(mi.Unit), metric.WithDescription(desc))
			}
			ints[mi.Name] = inst
			all = append(all, inst)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("celebrityotel: %s: %w", name, err)
		}
	}
	return ints, floats, all, nil
}
