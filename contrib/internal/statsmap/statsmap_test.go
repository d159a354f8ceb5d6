package statsmap

import (
	"testing"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/celebrity-go/celebrity/replicas"
	"github.com/celebrity-go/celebrity/routing"
	"github.com/celebrity-go/celebrity/stripes"
)

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"StaleIfErrorHits": "stale_if_error_hits", "Hits": "hits", "CopyReads": "copy_reads",
		"LastPause": "last_pause", "HTTPErrors": "http_errors", "DuplicateInstanceIDs": "duplicate_instance_ids",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEverySampleHasItsMetric checks, for every component, that metric names are unique
// and that each sample read from a Stats value names one of them, labelled when the metric
// has a label.
func TestEverySampleHasItsMetric(t *testing.T) {
	var rs replicas.Stats
	rs.CopyReads[2] = 7
	for _, tc := range []struct {
		c     Component
		stats any
	}{
		{L1Cache, l1cache.Stats{Hits: 3}}, {Invalidator, l1cache.InvalidatorStats{}}, {Replicas, rs},
		{Stripes, stripes.Stats{StripeWrites: []stripes.GenWrites{{Gen: 2, Writes: []uint64{1, 2}}}}},
		{StripesReader, stripes.ReaderStats{}}, {StripesFamily, stripes.FamilyStats{Names: 2, Applied: 5}}, {Escrow, escrow.Stats{}}, {Routing, routing.Stats{}},
		{Migrate, migrate.Stats{}}, {Hotkeys, hotkeys.Stats{}}, {Ratelimit, ratelimit.Stats{Allowed: 2}},
		{Cache, celebrity.Stats{SourceLoads: 1, L1: l1cache.Stats{Hits: 2}, Replicas: rs}},
	} {
		metrics := map[string]Metric{}
		for _, m := range tc.c.Metrics(tc.stats) {
			if _, dup := metrics[m.Name]; dup {
				t.Errorf("%s: metric %s twice", tc.c.Pkg, m.Name)
			}
			metrics[m.Name] = m
		}
		samples := tc.c.Samples(tc.stats)
		if len(samples) < len(metrics) {
			t.Errorf("%s: %d samples for %d metrics", tc.c.Pkg, len(samples), len(metrics))
		}
		for _, s := range samples {
			m, ok := metrics[s.Name]
			if !ok {
				t.Errorf("%s: sample %s has no metric", tc.c.Pkg, s.Name)
			} else if (m.Label != "") != (s.LabelValue != "") {
				t.Errorf("%s: sample %s labelled %q, metric label %q", tc.c.Pkg, s.Name, s.LabelValue, m.Label)
			}
		}
	}
}

// TestCacheCarriesItsParts checks that celebrity.Stats' parts arrive under the part's
// prefix, with their labels.
func TestCacheCarriesItsParts(t *testing.T) {
	var st celebrity.Stats
	st.L1.Hits, st.Replicas.CopyReads[1], st.Invalidator.Published, st.Hot = 4, 5, 6, 7
	got := map[string]float64{}
	for _, s := range Cache.Samples(st) {
		got[s.Name+"/"+s.LabelValue] = s.Value
	}
	for k, want := range map[string]float64{"l1_hits/": 4, "replicas_copy_reads/1": 5, "invalidator_published/": 6, "hot/": 7} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

// TestArraysExportOnlyTheIndexesInUse checks that a Cache whose copies were never read (a
// standalone server, where replication is off) exports no per-copy series, and one that
// read copies 0..2 exports three.
func TestArraysExportOnlyTheIndexesInUse(t *testing.T) {
	count := func(st celebrity.Stats) int {
		n := 0
		for _, s := range Cache.Samples(st) {
			if s.Name == "replicas_copy_reads" {
				n++
			}
		}
		return n
	}
	if n := count(celebrity.Stats{}); n != 0 {
		t.Errorf("no copy read: %d per-copy series, want 0", n)
	}
	var st celebrity.Stats
	st.Replicas.CopyReads[0], st.Replicas.CopyReads[2] = 4, 1
	if n := count(st); n != 3 {
		t.Errorf("copies 0..2 read: %d per-copy series, want 3", n)
	}
}
