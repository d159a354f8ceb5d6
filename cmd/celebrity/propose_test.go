package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/routing"
)

// testLoads builds each shard's load from shard -> tenant -> routed ops/s, as shardLoads
// does from a measurement. Tenant "*" is background load: four tenants of the shard with a
// quarter each.
func testLoads(names []string, rates map[string]map[string]float64) []*shardLoad {
	var out []*shardLoad
	for _, n := range names {
		l := &shardLoad{Name: n}
		tenants := map[string]float64{}
		for tenant, r := range rates[n] {
			if tenant != "*" {
				tenants[tenant] += r
				continue
			}
			for i := range 4 {
				tenants[fmt.Sprintf("%s.%d", n, i)] += r / 4
			}
		}
		for _, r := range tenants {
			l.RoutedPerS += r
		}
		for tenant, r := range tenants {
			l.Tenants = append(l.Tenants, tenantLoad{Tenant: tenant, RoutedPerS: r, Share: r / l.RoutedPerS})
		}
		sort.Slice(l.Tenants, func(i, j int) bool { return l.Tenants[i].Tenant < l.Tenants[j].Tenant })
		out = append(out, l)
	}
	return out
}

func testProposer(names []string, t *routing.Table) proposer {
	return proposer{table: t, names: names, threshold: 0.5, minRate: 1, shardArg: "--shard S", ctl: "--addr C"}
}

func shardNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a' + i))
	}
	return out
}

// TestProposeTable checks each kind of proposal plan makes, from loads given by hand: the
// action, the targets, the width and the exact command, in order.
func TestProposeTable(t *testing.T) {
	type want struct {
		action  string
		source  string
		targets []string
		width   int
		command string
	}
	for name, tc := range map[string]struct {
		shards int
		table  routing.Table
		rates  map[string]map[string]float64
		cache  bool
		want   []want
	}{
		"a bucketed tenant that fits on one shard is carved out onto the least-loaded other shard": {
			shards: 3,
			rates:  map[string]map[string]float64{"a": {"shop": 20, "*": 5}, "b": {"*": 30}, "c": {"*": 40}},
			want: []want{{"carve-out", "a", []string{"b"}, 0,
				"celebrity migrate start --carve --tenant shop --target b --shard S --addr C"}},
		},
		"an overridden tenant that fits on one shard is moved": {
			shards: 3,
			table:  routing.Table{Overrides: map[string]string{"shop": "a"}},
			rates:  map[string]map[string]float64{"a": {"shop": 20, "*": 5}, "b": {"*": 30}, "c": {"*": 40}},
			want: []want{{"move", "a", []string{"b"}, 0,
				"celebrity migrate start --tenant shop --target b --shard S --addr C"}},
		},
		"a bucketed tenant too big for one shard is carved out, then split over the least-loaded shards": {
			// mean 99/6, target 8.25/s per shard: 40/8.25 -> 5 sub-buckets of 6 shards. The
			// carve-out goes to the least-loaded shard other than its own (a).
			shards: 6,
			rates: map[string]map[string]float64{"a": {"fat": 40, "*": 5}, "b": {"*": 11}, "c": {"*": 11},
				"d": {"*": 11}, "e": {"*": 11}, "f": {"*": 10}},
			want: []want{
				{"carve-out", "a", []string{"f"}, 0, "celebrity migrate start --carve --tenant fat --target f --shard S --addr C"},
				{"split", "a", []string{"a", "b", "c", "d", "f"}, 5, "celebrity migrate start --split --tenant fat --target a,b,c,d,f --shard S --addr C"},
			},
		},
		"a split is as wide as the shards allow": {
			shards: 3,
			rates:  map[string]map[string]float64{"a": {"fat": 50, "*": 10}, "b": {"*": 20}, "c": {"*": 10}},
			want: []want{
				{"carve-out", "a", []string{"c"}, 0, "celebrity migrate start --carve --tenant fat --target c --shard S --addr C"},
				{"split", "a", []string{"a", "b", "c"}, 3, "celebrity migrate start --split --tenant fat --target a,b,c --shard S --addr C"},
			},
		},
		"an overridden tenant too big for one shard is split": {
			shards: 3,
			table:  routing.Table{Overrides: map[string]string{"fat": "b"}},
			rates:  map[string]map[string]float64{"a": {"*": 20}, "b": {"fat": 50, "*": 5}, "c": {"*": 10}},
			want: []want{{"split", "b", []string{"a", "b", "c"}, 3,
				"celebrity migrate start --split --tenant fat --target a,b,c --shard S --addr C"}},
		},
		"a spread tenant still too hot is re-split wider, no new sub-bucket on its old shard": {
			// 2 sub-buckets of 40/s against a target of 12.5/s: 4 of 4 shards; a,b,c,d
			// rotated so that sub-buckets 0 and 1 leave a and b.
			shards: 4,
			table:  routing.Table{Spreads: map[string][]string{"fat": {"a", "b"}}},
			rates:  map[string]map[string]float64{"a": {"fat": 40, "*": 5}, "b": {"fat": 40, "*": 5}, "c": {"*": 5}, "d": {"*": 5}},
			want: []want{{"re-split", "a", []string{"b", "c", "d", "a"}, 4,
				"celebrity migrate start --split --tenant fat --target b,c,d,a --shard S --addr C"}},
		},
		"a spread tenant over every shard has no wider spread to go to": {
			shards: 3,
			table:  routing.Table{Spreads: map[string][]string{"fat": {"a", "b", "c"}}},
			rates:  map[string]map[string]float64{"a": {"fat": 30}, "b": {"fat": 30}, "c": {"fat": 30}},
			want:   []want{{"re-split", "a", []string{}, 3, ""}},
		},
		"a spread tenant whose shards are quiet is left alone": {
			shards: 4,
			table:  routing.Table{Spreads: map[string][]string{"fat": {"a", "b"}}},
			rates: map[string]map[string]float64{"a": {"fat": 5}, "b": {"fat": 5},
				"c": {"*": 30}, "d": {"*": 30}},
		},
		"a spread tenant that cooled is merged back onto the least-loaded shard": {
			// mean 84/4 = 21, target 10.5/s; its whole 4/s fits: one unit on d (10/s).
			shards: 4,
			table:  routing.Table{Spreads: map[string][]string{"sale": {"a", "b"}}},
			rates: map[string]map[string]float64{"a": {"sale": 2, "*": 20}, "b": {"sale": 2, "*": 20},
				"c": {"*": 30}, "d": {"*": 10}},
			want: []want{{"merge", "a", []string{"d"}, 0,
				"celebrity migrate start --merge --tenant sale --target d --shard S --addr C"}},
		},
		"a spread tenant with no load measured is merged too": {
			shards: 3,
			table:  routing.Table{Spreads: map[string][]string{"sale": {"b", "c"}}},
			rates:  map[string]map[string]float64{"a": {"*": 10}, "b": {"*": 20}, "c": {"*": 30}},
			want: []want{{"merge", "b", []string{"a"}, 0,
				"celebrity migrate start --merge --tenant sale --target a --shard S --addr C"}},
		},
		"a pure cache gets a route change that re-loads": {
			shards: 3,
			cache:  true,
			rates:  map[string]map[string]float64{"a": {"fat": 50, "*": 10}, "b": {"*": 20}, "c": {"*": 10}},
			want: []want{{"spread", "a", []string{"a", "b", "c"}, 3,
				"celebrity routes spread fat a,b,c --cache --shard S --addr C"}},
		},
		"tenants under the threshold get nothing": {
			shards: 2,
			rates:  map[string]map[string]float64{"a": {"*": 30}, "b": {"*": 10}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			names := shardNames(tc.shards)
			p := testProposer(names, &tc.table)
			p.cache = tc.cache
			got := p.propose(testLoads(names, tc.rates))
			require.Len(t, got, len(tc.want), "%+v", got)
			for i, w := range tc.want {
				g := got[i]
				require.Equal(t, w, want{g.Action, g.Source, g.Targets, g.Width, g.Command}, "proposal %d: %+v", i, g)
				require.NotEmpty(t, g.Reason)
				require.Greater(t, g.MeanPerShard, 0.0)
				require.InDelta(t, 0.5*g.MeanPerShard, g.TargetPerShard, 1e-9)
				if g.Width > 0 {
					require.InDelta(t, g.RoutedPerS/float64(g.Width), g.PerSub, 1e-9)
				}
				if g.Command == "" {
					require.NotEmpty(t, g.Note, "a proposal without a command says why")
				}
			}
			// The human form carries each proposal's reason and command.
			text := renderPlan(planReport{Proposals: got})
			for _, g := range got {
				require.Contains(t, text, "why: "+g.Reason)
				require.Contains(t, text, g.Command)
			}
		})
	}
}

// TestProposeSplitWidthBoundedByMaxSpread checks that a tenant hotter than routing.MaxSpread
// shards' target is split over MaxSpread sub-buckets, not more, even with more shards.
func TestProposeSplitWidthBoundedByMaxSpread(t *testing.T) {
	names := make([]string, routing.MaxSpread+100)
	rates := map[string]map[string]float64{}
	for i := range names {
		names[i] = fmt.Sprintf("s%05d", i)
		rates[names[i]] = map[string]float64{"*": 4}
	}
	rates[names[0]]["fat"] = 1e6
	p := testProposer(names, &routing.Table{Overrides: map[string]string{"fat": names[0]}})
	got := p.propose(testLoads(names, rates))
	require.Len(t, got, 1)
	require.Equal(t, "split", got[0].Action)
	require.Equal(t, routing.MaxSpread, got[0].Width)
	require.Len(t, got[0].Targets, routing.MaxSpread)
	require.Contains(t, got[0].Reason, "the most the")
}

// TestArrangeResplitEveryOldSpread checks, for every old spread over up to 5 shards (each
// sub-bucket on any shard) and every wider width, that the new order is a permutation of
// the targets with no new sub-bucket i on old sub-bucket i's shard.
func TestArrangeResplitEveryOldSpread(t *testing.T) {
	for n := 2; n <= 5; n++ {
		targets := shardNames(n)
		for k := 1; k < n; k++ {
			old := make([]string, k)
			var walk func(i int)
			walk = func(i int) {
				if i == k {
					got := arrangeResplit(slices.Clone(targets), old)
					require.ElementsMatch(t, targets, got)
					for j := range old {
						require.NotEqual(t, old[j], got[j], "old %v -> new %v", old, got)
					}
					return
				}
				for _, s := range targets {
					old[i] = s
					walk(i + 1)
				}
			}
			walk(0)
		}
	}
	require.Equal(t, "b,c,a", strings.Join(arrangeResplit([]string{"a", "b", "c"}, []string{"a", "b"}), ","))
}
