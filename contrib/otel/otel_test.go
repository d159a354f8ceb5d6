package celebrityotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/celebrity-go/celebrity/celebritytest"
	celebrityotel "github.com/celebrity-go/celebrity/contrib/otel"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/replicas"
	"github.com/celebrity-go/celebrity/routing"
	"github.com/celebrity-go/celebrity/stripes"
)

func TestMain(m *testing.M) { celebritytest.Main(m) }

// collect reads every metric the reader holds, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// value returns the value of the data point of m whose attributes hold want (name=value
// pairs), and whether there is one.
func value(m metricdata.Metrics, want ...string) (float64, bool) {
	match := func(get func(string) (string, bool)) bool {
		for i := 0; i+1 < len(want); i += 2 {
			if v, ok := get(want[i]); !ok || v != want[i+1] {
				return false
			}
		}
		return true
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if match(func(k string) (string, bool) { v, ok := p.Attributes.Value(attrKey(k)); return v.AsString(), ok }) {
				return float64(p.Value), true
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if match(func(k string) (string, bool) { v, ok := p.Attributes.Value(attrKey(k)); return v.AsString(), ok }) {
				return float64(p.Value), true
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			if match(func(k string) (string, bool) { v, ok := p.Attributes.Value(attrKey(k)); return v.AsString(), ok }) {
				return p.Value, true
			}
		}
	}
	return 0, false
}

// TestEveryPackageStatsArriveAsNamedInstruments drives each component a little against a
// real Redis and checks that its Stats arrive under the documented names, kinds and
// attributes, with the values the component reports.
func TestEveryPackageStatsArriveAsNamedInstruments(t *testing.T) {
	ctx := t.Context()
	srv := celebritytest.Standalone(t)
	client := srv.Client(t)
	prefix := celebritytest.NewPrefix(t)
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// l1cache: two misses (one a not-found load), one hit, with load durations.
	hook, err := celebrityotel.LoadDurations(meter, celebrityotel.Options{Name: "users"})
	must(nil, err)
	cache, err := l1cache.New(func(_ context.Context, key string) (string, error) {
		if key == "missing" {
			return "", l1cache.ErrNotFound
		}
		return "v", nil
	}, l1cache.Options[string]{MaxEntries: 100, Fresh: time.Minute, OnEvent: hook})
	must(nil, err)
	defer cache.Close()
	must(celebrityotel.L1Cache(meter, cache, celebrityotel.Options{Name: "users"}))
	must(cache.Get(ctx, "k"))
	must(cache.Get(ctx, "k"))
	_, err = cache.Get(ctx, "missing")
	if !errors.Is(err, l1cache.ErrNotFound) {
		t.Fatalf("Get(missing): %v", err)
	}

	// replicas: one read of a logical key.
	rep, err := replicas.New(client, replicas.Options{Prefix: prefix + "replicas:"})
	must(nil, err)
	defer rep.Close()
	must(celebrityotel.Replicas(meter, rep, celebrityotel.Options{}))
	must(nil, rep.Set(ctx, "post", []byte("x"), 1, time.Minute))
	must(rep.Get(ctx, "post"))

	// stripes: three distinct events and one retry.
	ctr, err := stripes.New(client, stripes.Options{Name: prefix + "views", Stripes: 4})
	must(nil, err)
	defer ctr.Close()
	must(celebrityotel.Stripes(meter, ctr, celebrityotel.Options{}))
	now := time.Now()
	for _, id := range []string{"a", "b", "c", "a"} {
		must(ctr.Add(ctx, stripes.Event{ID: id, Time: now}, 1))
	}

	// escrow: two acquires of one job (the second a replay).
	lim, err := escrow.NewCentral(client, escrow.CentralOptions{Name: "seats", Capacity: 2, Prefix: prefix + "escrow:", AllowWeakDurability: true})
	must(nil, err)
	must(nil, lim.Init(ctx))
	must(celebrityotel.Escrow(meter, lim, celebrityotel.Options{}))
	must(lim.Acquire(ctx, "job"))
	must(lim.Acquire(ctx, "job"))

	// routing and migrate: registered, not driven (their counters are zero).
	rt, err := routing.New(client, routing.Options{Shards: map[string]routing.ShardClient{"a": client}, Prefix: prefix + "routing"})
	must(nil, err)
	defer rt.Close()
	must(celebrityotel.Routing(meter, rt, celebrityotel.Options{}))
	co, err := migrate.New(client, migrate.Options{Shards: map[string]migrate.ShardClient{"a": client, "b": client}, Prefix: prefix + "routing"})
	must(nil, err)
	must(celebrityotel.Migrate(meter, co, celebrityotel.Options{}))

	// hotkeys: five observations of one key.
	det, err := hotkeys.New(hotkeys.Options{SampleRate: 1, EvalInterval: -1})
	must(nil, err)
	defer det.Close()
	must(celebrityotel.Hotkeys(meter, det, celebrityotel.Options{}))
	for range 5 {
		det.Observe("post:ronaldo")
	}

	fetchesBefore := rt.Stats().Fetches
	got := collect(t, reader)
	fetchesAfter := rt.Stats().Fetches // the router's poll may fetch while collect runs
	want := []struct {
		name  string
		attrs []string
		value float64
	}{
		{"celebrity.l1cache.hits", []string{"celebrity.name", "users"}, 1},
		{"celebrity.l1cache.misses", []string{"celebrity.name", "users"}, 2},
		{"celebrity.l1cache.loads", nil, 2},
		{"celebrity.l1cache.entries", nil, float64(cache.Stats().Entries)},
		{"celebrity.replicas.primary_reads", nil, 1},
		{"celebrity.stripes.applied", nil, 3},
		{"celebrity.stripes.duplicates", nil, 1},
		{"celebrity.stripes.generation", nil, float64(ctr.Stats().StripeWrites[0].Gen)},
		{"celebrity.escrow.acquired", nil, 1},
		{"celebrity.escrow.replayed", nil, 1},
		{"celebrity.routing.generation", nil, 0},
		{"celebrity.migrate.started", nil, 0},
		{"celebrity.migrate.last_pause", nil, 0},
		{"celebrity.hotkeys.sampled", nil, 5},
		{"celebrity.hotkeys.tracked", nil, 1},
	}
	if _, ok := got["celebrity.replicas.copy_reads"]; ok {
		t.Error("celebrity.replicas.copy_reads collected on a standalone server, where no copy is read")
	}
	for _, w := range want {
		m, ok := got[w.name]
		if !ok {
			t.Errorf("%s: not collected", w.name)
			continue
		}
		v, ok := value(m, w.attrs...)
		if !ok || v != w.value {
			t.Errorf("%s%v = %v (found %v), want %v", w.name, w.attrs, v, ok, w.value)
		}
	}
	if m, ok := got["celebrity.routing.fetches"]; !ok {
		t.Errorf("celebrity.routing.fetches: not collected")
	} else if v, ok := value(m); !ok || v < float64(fetchesBefore) || v > float64(fetchesAfter) {
		t.Errorf("celebrity.routing.fetches = %v (found %v), want %d..%d", v, ok, fetchesBefore, fetchesAfter)
	}
	// The stripes of the newest generation add up to the applied events.
	var perStripe float64
	for i := range 4 {
		v, _ := value(got["celebrity.stripes.stripe_writes"], "stripe", fmt.Sprint(i))
		perStripe += v
	}
	if perStripe != 3 {
		t.Errorf("celebrity.stripes.stripe_writes sums to %v over 4 stripes, want 3", perStripe)
	}
	// Kinds: a count is a monotonic sum, an amount an up-down sum, a generation a gauge.
	for name, kind := range map[string]string{
		"celebrity.l1cache.hits": "counter", "celebrity.l1cache.entries": "updown",
		"celebrity.hotkeys.hot": "updown", "celebrity.routing.generation": "gauge",
		"celebrity.migrate.last_pause": "gauge",
	} {
		var k string
		switch d := got[name].Data.(type) {
		case metricdata.Sum[int64]:
			k = map[bool]string{true: "counter", false: "updown"}[d.IsMonotonic]
		case metricdata.Gauge[int64], metricdata.Gauge[float64]:
			k = "gauge"
		}
		if k != kind {
			t.Errorf("%s is a %q, want a %q", name, k, kind)
		}
	}
	if u := got["celebrity.migrate.last_pause"].Unit; u != "s" {
		t.Errorf("celebrity.migrate.last_pause unit %q, want s", u)
	}
	// Every field of every Stats type arrived as an instrument.
	for _, name := range []string{"stale_if_error_hits", "early_refreshes", "evictions"} {
		if _, ok := got["celebrity.l1cache."+name]; !ok {
			t.Errorf("celebrity.l1cache.%s: not collected", name)
		}
	}
	// Load durations: one histogram point per outcome.
	h, ok := got["celebrity.l1cache.load.duration"].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("celebrity.l1cache.load.duration: %T, want a histogram", got["celebrity.l1cache.load.duration"].Data)
	}
	counts := map[string]uint64{}
	for _, p := range h.DataPoints {
		o, _ := p.Attributes.Value("outcome")
		counts[o.AsString()] += p.Count
	}
	if counts["ok"] != 1 || counts["not_found"] != 1 || len(counts) != 2 {
		t.Errorf("load durations by outcome: %v, want ok:1 not_found:1", counts)
	}
}

// TestRegisterRefusesNil proves a nil meter or component is refused with ErrInvalid.
func TestRegisterRefusesNil(t *testing.T) {
	meter := sdkmetric.NewMeterProvider().Meter("test")
	if _, err := celebrityotel.Escrow(nil, (*escrow.Central)(nil), celebrityotel.Options{}); !errors.Is(err, celebrityotel.ErrInvalid) {
		t.Errorf("nil meter: %v", err)
	}
	var c interface{ Stats() escrow.Stats }
	if _, err := celebrityotel.Escrow(meter, c, celebrityotel.Options{}); !errors.Is(err, celebrityotel.ErrInvalid) {
		t.Errorf("nil component: %v", err)
	}
}

func attrKey(k string) attribute.Key { return attribute.Key(k) }
