package celebrityprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/celebrity-go/celebrity/celebritytest"
	celebrityprom "github.com/celebrity-go/celebrity/contrib/prometheus"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/replicas"
	"github.com/celebrity-go/celebrity/routing"
	"github.com/celebrity-go/celebrity/stripes"
)

func TestMain(m *testing.M) { celebritytest.Main(m) }

// TestEveryPackageStatsArriveAsNamedSeries drives each component a little against a real
// Redis and checks that its Stats arrive under the documented names, types and labels,
// with the values the component reports, and that the registry passes Prometheus's lint.
func TestEveryPackageStatsArriveAsNamedSeries(t *testing.T) {
	ctx := t.Context()
	client := celebritytest.Standalone(t).Client(t)
	prefix := celebritytest.NewPrefix(t)
	reg := prometheus.NewPedanticRegistry()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	loads, err := celebrityprom.NewLoadDurations(reg, celebrityprom.Options{Name: "users"})
	must(nil, err)
	cache, err := l1cache.New(func(_ context.Context, key string) (string, error) {
		if key == "missing" {
			return "", l1cache.ErrNotFound
		}
		return "v", nil
	}, l1cache.Options[string]{MaxEntries: 100, Fresh: time.Minute, OnEvent: loads.OnEvent})
	must(nil, err)
	defer cache.Close()
	must(celebrityprom.L1Cache(reg, cache, celebrityprom.Options{Name: "users"}))
	must(cache.Get(ctx, "k"))
	must(cache.Get(ctx, "k"))
	if _, err := cache.Get(ctx, "missing"); !errors.Is(err, l1cache.ErrNotFound) {
		t.Fatalf("Get(missing): %v", err)
	}

	rep, err := replicas.New(client, replicas.Options{Prefix: prefix + "replicas:"})
	must(nil, err)
	defer rep.Close()
	must(celebrityprom.Replicas(reg, rep, celebrityprom.Options{}))
	must(nil, rep.Set(ctx, "post", []byte("x"), 1, time.Minute))
	must(rep.Get(ctx, "post"))

	ctr, err := stripes.New(client, stripes.Options{Name: prefix + "views", Stripes: 4})
	must(nil, err)
	defer ctr.Close()
	must(celebrityprom.Stripes(reg, ctr, celebrityprom.Options{}))
	now := time.Now()
	for _, id := range []string{"a", "b", "c", "a"} {
		must(ctr.Add(ctx, stripes.Event{ID: id, Time: now}, 1))
	}

	lim, err := escrow.NewCentral(client, escrow.CentralOptions{Name: "seats", Capacity: 2, Prefix: prefix + "escrow:", AllowWeakDurability: true})
	must(nil, err)
	must(nil, lim.Init(ctx))
	must(celebrityprom.Escrow(reg, lim, celebrityprom.Options{}))
	must(lim.Acquire(ctx, "job"))
	must(lim.Acquire(ctx, "job"))

	rt, err := routing.New(client, routing.Options{Shards: map[string]routing.ShardClient{"a": client}, Prefix: prefix + "routing"})
	must(nil, err)
	defer rt.Close()
	must(celebrityprom.Routing(reg, rt, celebrityprom.Options{}))
	co, err := migrate.New(client, migrate.Options{Shards: map[string]migrate.ShardClient{"a": client, "b": client}, Prefix: prefix + "routing"})
	must(nil, err)
	must(celebrityprom.Migrate(reg, co, celebrityprom.Options{}))

	det, err := hotkeys.New(hotkeys.Options{SampleRate: 1, EvalInterval: -1})
	must(nil, err)
	defer det.Close()
	must(celebrityprom.Hotkeys(reg, det, celebrityprom.Options{}))
	for range 5 {
		det.Observe("post:ronaldo")
	}

	gen := ctr.Stats().StripeWrites[0]
	var stripeLines strings.Builder
	for i, w := range gen.Writes {
		fmt.Fprintf(&stripeLines, "celebrity_stripes_stripe_writes{stripe=\"%d\"} %d\n", i, w)
	}
	expected := `
# HELP celebrity_l1cache_hits_total l1cache.Stats.Hits (see that field's documentation).
# TYPE celebrity_l1cache_hits_total counter
celebrity_l1cache_hits_total{name="users"} 1
# HELP celebrity_l1cache_misses_total l1cache.Stats.Misses (see that field's documentation).
# TYPE celebrity_l1cache_misses_total counter
celebrity_l1cache_misses_total{name="users"} 2
# HELP celebrity_l1cache_entries l1cache.Stats.Entries (see that field's documentation).
# TYPE celebrity_l1cache_entries gauge
celebrity_l1cache_entries{name="users"} ` + fmt.Sprint(cache.Stats().Entries) + `
# HELP celebrity_replicas_primary_reads_total replicas.Stats.PrimaryReads (see that field's documentation).
# TYPE celebrity_replicas_primary_reads_total counter
celebrity_replicas_primary_reads_total 1
# HELP celebrity_stripes_applied_total stripes.Stats.Applied (see that field's documentation).
# TYPE celebrity_stripes_applied_total counter
celebrity_stripes_applied_total 3
# HELP celebrity_stripes_duplicates_total stripes.Stats.Duplicates (see that field's documentation).
# TYPE celebrity_stripes_duplicates_total counter
celebrity_stripes_duplicates_total 1
# HELP celebrity_stripes_generation stripes.Stats.StripeWrites (see that field's documentation).
# TYPE celebrity_stripes_generation gauge
celebrity_stripes_generation ` + fmt.Sprint(gen.Gen) + `
# HELP celebrity_stripes_stripe_writes stripes.Stats.StripeWrites (see that field's documentation).
# TYPE celebrity_stripes_stripe_writes gauge
` + stripeLines.String() + `# HELP celebrity_escrow_acquired_total escrow.Stats.Acquired (see that field's documentation).
# TYPE celebrity_escrow_acquired_total counter
celebrity_escrow_acquired_total 1
# HELP celebrity_escrow_replayed_total escrow.Stats.Replayed (see that field's documentation).
# TYPE celebrity_escrow_replayed_total counter
celebrity_escrow_replayed_total 1
# HELP celebrity_routing_generation routing.Stats.Generation (see that field's documentation).
# TYPE celebrity_routing_generation gauge
celebrity_routing_generation 0
# HELP celebrity_migrate_last_pause_seconds migrate.Stats.LastPause (see that field's documentation).
# TYPE celebrity_migrate_last_pause_seconds gauge
celebrity_migrate_last_pause_seconds 0
# HELP celebrity_hotkeys_sampled_total hotkeys.Stats.Sampled (see that field's documentation).
# TYPE celebrity_hotkeys_sampled_total counter
celebrity_hotkeys_sampled_total 5
# HELP celebrity_hotkeys_tracked hotkeys.Stats.Tracked (see that field's documentation).
# TYPE celebrity_hotkeys_tracked gauge
celebrity_hotkeys_tracked 1
`
	names := []string{
		"celebrity_l1cache_hits_total", "celebrity_l1cache_misses_total", "celebrity_l1cache_entries",
		"celebrity_replicas_primary_reads_total", "celebrity_stripes_applied_total",
		"celebrity_stripes_duplicates_total", "celebrity_stripes_generation", "celebrity_stripes_stripe_writes",
		"celebrity_escrow_acquired_total", "celebrity_escrow_replayed_total", "celebrity_routing_generation",
		"celebrity_migrate_last_pause_seconds", "celebrity_hotkeys_sampled_total", "celebrity_hotkeys_tracked",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), names...); err != nil {
		t.Error(err)
	}
	// One series per copy index in use: none on a standalone server, where no copy is read.
	if n := len(series(t, reg, "celebrity_replicas_copy_reads_total")); n != 0 {
		t.Errorf("celebrity_replicas_copy_reads_total has %d series on a standalone server, want 0", n)
	}
	// Load durations: one observation per outcome.
	got := map[string]uint64{}
	for _, m := range series(t, reg, "celebrity_l1cache_load_duration_seconds") {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" {
				got[l.GetValue()] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if got["ok"] != 1 || got["not_found"] != 1 || len(got) != 2 {
		t.Errorf("celebrity_l1cache_load_duration_seconds observations by outcome: %v, want ok:1 not_found:1", got)
	}
	// Prometheus's own lint of names, units and help strings.
	problems, err := testutil.GatherAndLint(reg)
	must(nil, err)
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// series returns the series of the family name in reg.
func series(t *testing.T, reg prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

// TestRegisterRefusesNilAndDuplicates proves a nil registerer is refused with ErrInvalid
// and a second registration of the same component kind and name is refused by the
// registry.
func TestRegisterRefusesNilAndDuplicates(t *testing.T) {
	det, err := hotkeys.New(hotkeys.Options{EvalInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer det.Close()
	if _, err := celebrityprom.Hotkeys(nil, det, celebrityprom.Options{}); !errors.Is(err, celebrityprom.ErrInvalid) {
		t.Errorf("nil registerer: %v", err)
	}
	reg := prometheus.NewRegistry()
	if _, err := celebrityprom.Hotkeys(reg, det, celebrityprom.Options{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := celebrityprom.Hotkeys(reg, det, celebrityprom.Options{Name: "a"}); err == nil {
		t.Error("a second registration with the same name was accepted")
	}
}
