package celebrityprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	celebrityprom "github.com/celebrity-go/celebrity/contrib/prometheus"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/celebrity-go/celebrity/stripes"
)

// TestRatelimitInvalidatorAndReaderArriveAsNamedSeries is
// TestEveryPackageStatsArriveAsNamedSeries for ratelimit's Limiter, l1cache's Invalidator
// and stripes' Reader.
func TestRatelimitInvalidatorAndReaderArriveAsNamedSeries(t *testing.T) {
	ctx := t.Context()
	client := celebritytest.Standalone(t).Client(t)
	prefix := celebritytest.NewPrefix(t)
	reg := prometheus.NewPedanticRegistry()

	lim, err := ratelimit.New(client, ratelimit.Options{Limit: ratelimit.Limit{Rate: 2, Period: time.Minute}, Prefix: prefix + "rl:"})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	if _, err := celebrityprom.Ratelimit(reg, lim, celebrityprom.Options{Name: "api"}); err != nil {
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
	if _, err := celebrityprom.Invalidator(reg, inv, celebrityprom.Options{}); err != nil {
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
	if _, err := celebrityprom.StripesReader(reg, rd, celebrityprom.Options{}); err != nil {
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
	for name, want := range map[string]float64{
		"celebrity_ratelimit_allowed_total": 2, "celebrity_ratelimit_denied_total": 1,
		"celebrity_ratelimit_calls_total": float64(rs.Calls), "celebrity_ratelimit_keys": float64(rs.Keys),
		"celebrity_l1cache_invalidator_published_total": 1,
		"celebrity_stripes_reader_refreshes_total":      1, "celebrity_stripes_reader_hits_total": 1,
	} {
		s := series(t, reg, name)
		if len(s) != 1 {
			t.Errorf("%s: %d series, want 1", name, len(s))
			continue
		}
		got := s[0].GetCounter().GetValue() + s[0].GetGauge().GetValue()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if s := series(t, reg, "celebrity_ratelimit_allowed_total"); len(s) == 1 && (len(s[0].GetLabel()) != 1 || s[0].GetLabel()[0].GetValue() != "api") {
		t.Errorf("celebrity_ratelimit_allowed_total labels %v, want name=api only", s[0].GetLabel())
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestCacheStatsArriveAsNamedSeries checks that a celebrity.Cache's Stats, its parts'
// included, arrive under the cache's names.
func TestCacheStatsArriveAsNamedSeries(t *testing.T) {
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
	reg := prometheus.NewPedanticRegistry()
	if _, err := celebrityprom.Cache(reg, c, celebrityprom.Options{Name: "posts"}); err != nil {
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
	for name, want := range map[string]float64{
		"celebrity_cache_source_loads_total": 1, "celebrity_cache_l1_hits_total": 2,
		"celebrity_cache_l1_misses_total": float64(st.L1.Misses), "celebrity_cache_hot": float64(st.Hot),
		"celebrity_cache_invalidator_published_total": float64(st.Invalidator.Published),
	} {
		s := series(t, reg, name)
		if len(s) != 1 {
			t.Errorf("%s: %d series, want 1", name, len(s))
			continue
		}
		if got := s[0].GetCounter().GetValue() + s[0].GetGauge().GetValue(); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n := len(series(t, reg, "celebrity_cache_replicas_copy_reads_total")); n != 0 {
		t.Errorf("celebrity_cache_replicas_copy_reads_total has %d series on a standalone server (no copies), want 0", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
