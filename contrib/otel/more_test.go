package celebrityotel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	celebrityotel "github.com/celebrity-go/celebrity/contrib/otel"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/celebrity-go/celebrity/stripes"
)

// TestRatelimitInvalidatorAndReaderArriveAsNamedInstruments is
// TestEveryPackageStatsArriveAsNamedInstruments for ratelimit's Limiter, l1cache's
// Invalidator and stripes' Reader.
func TestRatelimitInvalidatorAndReaderArriveAsNamedInstruments(t *testing.T) {
	ctx := t.Context()
	client := celebritytest.Standalone(t).Client(t)
	prefix := celebritytest.NewPrefix(t)
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")

	lim, err := ratelimit.New(client, ratelimit.Options{Limit: ratelimit.Limit{Rate: 2, Period: time.Minute}, Prefix: prefix + "rl:"})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	if _, err := celebrityotel.Ratelimit(meter, lim, celebrityotel.Options{Name: "api"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := lim.Allow(ctx, "user:1"); err != nil {
			t.Fatal(err)
		}
	}

	cache, err := l1cache.New(func(context.Context, string) (string, error) { return "v", nil }, l1cache.Options[string]{MaxEntries: 10, Fresh: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	inv, err := l1cache.NewInvalidator(client, cache, l1cache.InvalidatorOptions{Channel: prefix + "inv"})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	if _, err := celebrityotel.Invalidator(meter, inv, celebrityotel.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := inv.Invalidate(ctx, "k"); err != nil {
		t.Fatal(err)
	}

	ctr, err := stripes.New(client, stripes.Options{Name: prefix + "views", Stripes: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ctr.Close()
	rd, err := stripes.NewReader(ctr, stripes.ReaderOptions{MaxStaleness: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if _, err := celebrityotel.StripesReader(meter, rd, celebrityotel.Options{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := rd.Value(ctx); err != nil {
			t.Fatal(err)
		}
	}

	rs, is, ds := lim.Stats(), inv.Stats(), rd.Stats()
	if rs.Allowed != 2 || rs.Denied != 1 || is.Published != 1 || ds.Refreshes != 1 || ds.Hits != 1 {
		t.Fatalf("stats: ratelimit %+v, invalidator %+v, reader %+v", rs, is, ds)
	}
	got := collect(t, reader)
	for name, want := range map[string]float64{
		"celebrity.ratelimit.allowed": 2, "celebrity.ratelimit.denied": 1,
		"celebrity.ratelimit.calls": float64(rs.Calls), "celebrity.ratelimit.keys": float64(rs.Keys),
		"celebrity.l1cache.invalidator.published": 1,
		"celebrity.stripes.reader.refreshes":      1, "celebrity.stripes.reader.hits": 1,
	} {
		if v, ok := value(got[name]); !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
		}
	}
	if v, ok := value(got["celebrity.ratelimit.allowed"], "celebrity.name", "api"); !ok || v != 2 {
		t.Errorf("celebrity.ratelimit.allowed{celebrity.name=api} = %v (%v), want 2", v, ok)
	}
	if d, ok := got["celebrity.ratelimit.keys"].Data.(metricdata.Sum[int64]); !ok || d.IsMonotonic {
		t.Errorf("celebrity.ratelimit.keys is %T, want an up-down counter", got["celebrity.ratelimit.keys"].Data)
	}
	if u := got["celebrity.ratelimit.allowed"].Unit; u != "{request}" {
		t.Errorf("celebrity.ratelimit.allowed unit %q, want {request}", u)
	}
}

// TestCacheStatsArriveAsNamedInstruments checks that a celebrity.Cache's Stats, its parts'
// included, arrive under the cache's names.
func TestCacheStatsArriveAsNamedInstruments(t *testing.T) {
	ctx := t.Context()
	client := celebritytest.Standalone(t).Client(t)
	c, err := celebrity.New(client, func(_ context.Context, id string) (celebrity.Versioned[string], error) {
		return celebrity.Versioned[string]{Value: "v:" + id, Version: 1}, nil
	}, celebrity.Options[string]{Prefix: celebritytest.NewPrefix(t), Fresh: time.Minute, Stale: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	if _, err := celebrityotel.Cache(meter, c, celebrityotel.Options{Name: "posts"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Get(ctx, "post"); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	if st.SourceLoads != 1 || st.L1.Hits != 2 {
		t.Fatalf("Stats = %+v, want 1 source load and 2 L1 hits", st)
	}
	got := collect(t, reader)
	for name, want := range map[string]float64{
		"celebrity.cache.source_loads": 1, "celebrity.cache.l1_hits": 2,
		"celebrity.cache.l1_misses": float64(st.L1.Misses), "celebrity.cache.hot": float64(st.Hot),
		"celebrity.cache.invalidator_published": float64(st.Invalidator.Published),
	} {
		if v, ok := value(got[name], "celebrity.name", "posts"); !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
		}
	}
	if v, ok := value(got["celebrity.cache.replicas_copy_reads"], "copy", "0"); ok {
		t.Errorf("celebrity.cache.replicas_copy_reads{copy=0} = %v on a standalone server (no copies), want no data point", v)
	}
	if _, ok := got["celebrity.cache.duplicate_instance_ids"]; !ok {
		t.Error("no celebrity.cache.duplicate_instance_ids")
	}
}
