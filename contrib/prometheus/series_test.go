package celebrityprom_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	celebrityprom "github.com/celebrity-go/celebrity/contrib/prometheus"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/celebrity-go/celebrity/stripes"
)

var update = flag.Bool("update", false, "rewrite testdata/series.golden")

// TestOneCacheAndOneLimiterSeries registers a celebrity.Cache and a ratelimit.Limiter of a
// service on a standalone server, where the Cache keeps no copies, and pins every series
// they export, by name and labels, in testdata/series.golden: a change of a name or of the
// number of series shows in review.
func TestOneCacheAndOneLimiterSeries(t *testing.T) {
	client := celebritytest.Standalone(t).Client(t)
	p := celebritytest.NewPrefix(t)
	c, err := celebrity.New(client, func(_ context.Context, id string) (celebrity.Versioned[string], error) {
		return celebrity.Versioned[string]{Value: "v", Version: 1}, nil
	}, celebrity.Options[string]{Prefix: p + "cache:"})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Ready(t.Context()))
	lim, err := ratelimit.New(client, ratelimit.Options{Limit: ratelimit.Limit{Rate: 100, Period: time.Second}, Prefix: p + "rl:"})
	require.NoError(t, err)
	defer lim.Close()
	for range 3 {
		_, err = c.Get(t.Context(), "post:7")
		require.NoError(t, err)
		_, err = lim.Allow(t.Context(), "user:1")
		require.NoError(t, err)
	}

	reg := prometheus.NewPedanticRegistry()
	_, err = celebrityprom.Cache(reg, c, celebrityprom.Options{Name: "posts"})
	require.NoError(t, err)
	_, err = celebrityprom.Ratelimit(reg, lim, celebrityprom.Options{Name: "api"})
	require.NoError(t, err)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var lines []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			lines = append(lines, fmt.Sprintf("%s %s{%s}", strings.ToLower(mf.GetType().String()), mf.GetName(), strings.Join(labels, ",")))
		}
	}
	sort.Strings(lines)
	got := fmt.Sprintf("%d series\n%s\n", len(lines), strings.Join(lines, "\n"))
	if *update {
		require.NoError(t, os.WriteFile("testdata/series.golden", []byte(got), 0o644))
	}
	want, err := os.ReadFile("testdata/series.golden")
	require.NoError(t, err, "run with -update to create it")
	require.Equal(t, string(want), got)
}

// TestStripesFamilyArrivesAsNamedSeries drives a stripes.Family on a real server and checks
// its Stats under celebrity_stripes_family_*, added over its names (no name is a label).
func TestStripesFamilyArrivesAsNamedSeries(t *testing.T) {
	client := celebritytest.Standalone(t).Client(t)
	fam, err := stripes.NewFamily(client, stripes.FamilyOptions{Counter: stripes.Options{Prefix: celebritytest.NewPrefix(t)},
		Interval: -1, MaxStaleness: time.Hour})
	require.NoError(t, err)
	defer fam.Close()
	reg := prometheus.NewPedanticRegistry()
	_, err = celebrityprom.StripesFamily(reg, fam, celebrityprom.Options{Name: "views"})
	require.NoError(t, err)
	now := time.Now()
	for _, a := range []struct{ name, id string }{{"course:1", "a"}, {"course:1", "a"}, {"course:2", "a"}} {
		_, err := fam.Add(t.Context(), a.name, stripes.Event{ID: a.id, Time: now}, 1)
		require.NoError(t, err)
	}
	for range 2 {
		_, err := fam.Sum(t.Context(), "course:1")
		require.NoError(t, err)
	}
	want := `
# HELP celebrity_stripes_family_applied_total stripes.FamilyStats.Applied (see that field's documentation).
# TYPE celebrity_stripes_family_applied_total counter
celebrity_stripes_family_applied_total{name="views"} 2
# HELP celebrity_stripes_family_cached_sums_total stripes.FamilyStats.CachedSums (see that field's documentation).
# TYPE celebrity_stripes_family_cached_sums_total counter
celebrity_stripes_family_cached_sums_total{name="views"} 1
# HELP celebrity_stripes_family_duplicates_total stripes.FamilyStats.Duplicates (see that field's documentation).
# TYPE celebrity_stripes_family_duplicates_total counter
celebrity_stripes_family_duplicates_total{name="views"} 1
# HELP celebrity_stripes_family_names stripes.FamilyStats.Names (see that field's documentation).
# TYPE celebrity_stripes_family_names gauge
celebrity_stripes_family_names{name="views"} 2
# HELP celebrity_stripes_family_sums_total stripes.FamilyStats.Sums (see that field's documentation).
# TYPE celebrity_stripes_family_sums_total counter
celebrity_stripes_family_sums_total{name="views"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"celebrity_stripes_family_applied_total", "celebrity_stripes_family_cached_sums_total",
		"celebrity_stripes_family_duplicates_total", "celebrity_stripes_family_names", "celebrity_stripes_family_sums_total"))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Equal(t, 11, n, "one series per field of FamilyStats")
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestPerCopySeriesOnlyWhereCopiesAreRead runs a Cache on a 3-master cluster, where a
// promoted key is read from its copies: the per-copy series appear, at most one per copy
// (Options.Copies), never replicas.MaxCopies.
func TestPerCopySeriesOnlyWhereCopiesAreRead(t *testing.T) {
	client := celebritytest.SharedCluster(t).Client(t)
	c, err := celebrity.New(client, func(_ context.Context, id string) (celebrity.Versioned[string], error) {
		return celebrity.Versioned[string]{Value: "v", Version: 1}, nil
	}, celebrity.Options[string]{Prefix: celebritytest.NewPrefix(t),
		Loop: celebrity.LoopOptions{ReportInterval: -1}, Fresh: time.Millisecond, Stale: -1})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Ready(t.Context()))
	require.NoError(t, c.Promote(t.Context(), "post:7"))
	reg := prometheus.NewPedanticRegistry()
	_, err = celebrityprom.Cache(reg, c, celebrityprom.Options{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.Get(t.Context(), "post:7")
		require.NoError(t, err)
		var reads uint64
		for _, n := range c.Stats().Replicas.CopyReads {
			reads += n
		}
		return reads > 0
	}, 30*time.Second, time.Millisecond, "a promoted key is read from its copies")
	n := len(series(t, reg, "celebrity_cache_replicas_copy_reads_total"))
	require.GreaterOrEqual(t, n, 1)
	require.LessOrEqual(t, n, c.Options().Copies)
}
