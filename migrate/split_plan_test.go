package migrate

import (
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/routing"
)

// subField returns a record field of tenant that a width-w spread puts in sub-bucket want.
func subField(t *testing.T, tenant string, w, want int) string {
	t.Helper()
	for i := range 1000 {
		f := routingfmt.RecordField(tenant, "k"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		if sub, ok := splitSub(tenant, f, w); ok && sub == want {
			return f
		}
	}
	t.Fatalf("no field of %q in sub-bucket %d of %d", tenant, want, w)
	return ""
}

func TestSplitAskRoutesRecordsAndAsksEveryHolderForOps(t *testing.T) {
	f0, f1 := subField(t, "ten", 2, 0), subField(t, "ten", 2, 1)
	other := routingfmt.RecordField("else", "k")
	batch := []string{"r" + f0, "oop1", "r" + f1, "r" + other, "r" + f0 + "x"}
	got := splitAsk("ten", batch, 2)
	want := map[int][]string{0: {"r" + f0, "oop1"}, 1: {"oop1", "r" + f1}}
	if sub, ok := splitSub("ten", f0+"x", 2); ok {
		want[sub] = append(want[sub], "r"+f0+"x")
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("splitAsk = %v, want %v", got, want)
	}
	if got := splitAsk("ten", []string{"r" + other}, 3); len(got) != 0 {
		t.Fatalf("splitAsk of another tenant's record = %v, want nothing", got)
	}
}

func TestKindFieldsKeepsOrder(t *testing.T) {
	keys := []string{"ra", "ox", "rb", "oy"}
	if got := kindFields(keys, "r"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("kindFields(r) = %v", got)
	}
	if got := kindFields(keys, "o"); !reflect.DeepEqual(got, []string{"x", "y"}) {
		t.Fatalf("kindFields(o) = %v", got)
	}
	if got := kindFields(keys[:1], "o"); got != nil {
		t.Fatalf("kindFields without ops = %v, want nil", got)
	}
}

func TestPlanSplitSettle(t *testing.T) {
	keys := routingfmt.UnitKeys{Tombstones: "src:t", OpExpiry: "src:o"}
	s0 := &holder{sh: &shard{name: "s0"}, k: keys}
	d0 := &holder{sh: &shard{name: "d0"}, k: routingfmt.UnitKeys{Tombstones: "dst:t", OpExpiry: "dst:o"}}
	tomb := routingfmt.EncodeRecord(routing.Record{Version: 3, Deleted: true})
	live := routingfmt.EncodeRecord(routing.Record{Version: 3, Value: "v"})
	a, b := newSide(), newSide()
	where := map[string][2]*holder{}
	put := func(key, va, vb string, w [2]*holder) {
		a.set(key, va)
		b.set(key, vb)
		where[key] = w
	}
	put("requal", live, live, [2]*holder{s0, d0})
	put("rboth", live, tomb, [2]*holder{s0, d0})   // both hold it: a difference
	put("rlive", live, "", [2]*holder{s0, d0})     // a live record held alone
	put("rtombsrc", tomb, "", [2]*holder{s0, d0})  // a tombstone the source holds alone
	put("rtombdst", "", tomb, [2]*holder{s0, d0})  // a tombstone the target holds alone
	put("oopsrc", "op", "", [2]*holder{s0, d0})    // an op record the source holds alone
	put("oopdst", "", "op", [2]*holder{s0, d0})    // an op record the target holds alone
	put("onowhere", "op", "", [2]*holder{nil, d0}) // no source holder was read
	keysSorted := []string{"oopdst", "oopsrc", "onowhere", "rboth", "requal", "rlive", "rtombdst", "rtombsrc"}
	groups, differ := planSplitSettle(keysSorted, a, b, where, 100, 50)
	if want := []string{"nowhere", "both", "live"}; !reflect.DeepEqual(differ, want) {
		t.Fatalf("differences %v, want %v", differ, want)
	}
	type g struct {
		shard, zset string
		limit       int64
		keys        []string
	}
	var got []g
	for _, x := range groups {
		got = append(got, g{x.h.sh.name, x.zset, x.limit, x.keys})
	}
	want := []g{
		{"s0", "src:o", 50, []string{"oopsrc"}},
		{"s0", "src:t", 100, []string{"rtombsrc"}},
		{"d0", "dst:o", 100, []string{"oopdst"}},
		{"d0", "dst:t", 100, []string{"rtombdst"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groups %+v, want %+v", got, want)
	}
}

func TestSplitPassGroup(t *testing.T) {
	f0, f1 := subField(t, "ten", 2, 0), subField(t, "ten", 2, 1)
	op := routingfmt.EncodeOpRecord(routingfmt.OpRecord{Fingerprint: "fp", Outcome: routingfmt.OutcomeApplied, Version: 1, Field: f1})
	mine := newSide()
	mine.set("r"+f0+"seen", "1:l:x")
	src := splitPass{from: make([]holder, 1), to: make([]holder, 2), mine: mine, theirs: newSide()}
	kv := []string{
		f0, "1:l:a",
		routingfmt.RecordField("else", "k"), "1:l:b", // another tenant's: not this split's
		"op1", op, // goes with the field it names
		"op2", routingfmt.EncodeOpRecord(routingfmt.OpRecord{Fingerprint: "fp", Outcome: routingfmt.OutcomeApplied, Version: 1}), // names no field: does not travel
		f0 + "seen", "1:l:c", // seen before: kept as it was
	}
	groups, _, ok := src.group("ten", "r", 0, kv[:6])
	if !ok || !reflect.DeepEqual(groups, map[int][]string{0: {f0}}) {
		t.Fatalf("records: groups %v, ok %v", groups, ok)
	}
	groups, _, ok = src.group("ten", "o", 0, kv[4:8])
	if !ok || !reflect.DeepEqual(groups, map[int][]string{1: {"op1"}}) {
		t.Fatalf("ops: groups %v, ok %v", groups, ok)
	}
	if groups, _, _ = src.group("ten", "r", 0, kv[8:]); len(groups) != 0 || mine.get("r"+f0+"seen") != "1:l:x" {
		t.Fatalf("a seen item was grouped (%v) or overwritten (%q)", groups, mine.get("r"+f0+"seen"))
	}
	if mine.get("r"+f0) != "1:l:a" || mine.get("oop1") != op {
		t.Fatalf("new items not recorded on mine: %v", mine.m)
	}
	dst := splitPass{from: make([]holder, 2), to: make([]holder, 1), mine: newSide(), theirs: newSide(), target: true}
	if groups, _, ok := dst.group("ten", "r", 1, []string{f1, "1:l:a"}); !ok || !reflect.DeepEqual(groups, map[int][]string{0: {f1}}) {
		t.Fatalf("target's own item: groups %v, ok %v", groups, ok)
	}
	for _, f := range []string{f0, routingfmt.RecordField("else", "k"), ""} {
		if _, bad, ok := dst.group("ten", "r", 1, []string{f1, "1:l:a", f, "1:l:b"}); ok || bad != f {
			t.Fatalf("target item %q of another sub-bucket: misplaced %q, ok %v", f, bad, ok)
		}
	}
}

func TestCheckSplitSpecRefusesBadInput(t *testing.T) {
	newID := func() string { return "fresh" }
	two := []string{"a", "b"}
	for _, tc := range []struct {
		name string
		spec SplitSpec
		want string
	}{
		{"empty tenant", SplitSpec{ID: "m1", Targets: two}, "tenant:"},
		{"ID with braces", SplitSpec{Tenant: "t", ID: "m{1}", Targets: two}, "without braces"},
		{"no target", SplitSpec{Tenant: "t", ID: "m1"}, "Targets must name 1.."},
		{"too many targets", SplitSpec{Tenant: "t", ID: "m1", Targets: make([]string, routing.MaxSpread+1)}, "shards (one per sub-bucket of the new spread; one for a merge), got " + strconv.Itoa(routing.MaxSpread+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := checkSplitSpec(tc.spec, newID)
			requireInvalid(t, err, tc.want)
		})
	}
	// One target is a merge: checkSplitSpec takes it; planSplit refuses it for an override.
	if _, _, err := checkSplitSpec(SplitSpec{Tenant: "t", ID: "m1", Targets: two[:1]}, newID); err != nil {
		t.Fatalf("one target (a merge): %v", err)
	}
	u, id, err := checkSplitSpec(SplitSpec{Tenant: "t:{1}", Targets: two}, newID)
	if err != nil || id != "fresh" || u != routing.TenantUnit("t:{1}") {
		t.Fatalf("checkSplitSpec = %v, %q, %v; want the tenant unit, the fresh ID, no error", u, id, err)
	}
}

func TestPlanSplit(t *testing.T) {
	tab := routing.EvenTable(7, 16, "a", "b", "c", "d")
	tab.Overrides = map[string]string{"over": "a"}
	tab.Spreads = map[string][]string{"wide": {"a", "b"}}
	all := knownShards("a", "b", "c", "d", "x")
	for _, tc := range []struct {
		name string
		spec SplitSpec
		has  func(string) bool
		want string
	}{
		{"unknown target", SplitSpec{Tenant: "over", Targets: []string{"b", "y"}}, all, `Targets[1]: unknown shard "y"`},
		{"target not in table", SplitSpec{Tenant: "over", Targets: []string{"x", "b"}}, all, `Targets[0]: shard "x" is not named in the table`},
		{"no client for override", SplitSpec{Tenant: "over", Targets: []string{"b", "c"}}, knownShards("b", "c"), `no client for source shard "a"`},
		{"bucket tenant", SplitSpec{Tenant: "plain", Targets: []string{"b", "c"}}, all, "carve it out first"},
		{"same width", SplitSpec{Tenant: "wide", Targets: []string{"c", "d"}}, all, "a re-split must change the width"},
		{"sub-bucket stays", SplitSpec{Tenant: "wide", Targets: []string{"c", "b", "d"}}, all, `Targets[1] is "b"`},
		{"no client for sub-bucket", SplitSpec{Tenant: "wide", Targets: []string{"c", "d", "a"}}, knownShards("a", "c", "d"), `no client for source shard "b" (sub-bucket 1)`},
		{"merge of an override", SplitSpec{Tenant: "over", Targets: []string{"b"}}, all, "one unit already"},
		{"no client for a merged sub-bucket", SplitSpec{Tenant: "wide", Targets: []string{"c"}}, knownShards("a", "c"), `no client for source shard "b" (sub-bucket 1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planSplit(tab, tc.spec, tc.has)
			requireInvalid(t, err, tc.want)
		})
	}
	lanes, err := planSplit(tab, SplitSpec{Tenant: "over", Targets: []string{"b", "c"}}, all)
	if want := []lane{{unit: routing.TenantUnit("over"), shard: "a"}}; err != nil || !reflect.DeepEqual(lanes, want) {
		t.Fatalf("split of an override: %v, %v; want %v", lanes, err, want)
	}
	lanes, err = planSplit(tab, SplitSpec{Tenant: "wide", Targets: []string{"c", "d", "a"}}, all)
	want := []lane{{unit: routing.SpreadUnit("wide", 0), shard: "a"}, {unit: routing.SpreadUnit("wide", 1), shard: "b"}}
	if err != nil || !reflect.DeepEqual(lanes, want) {
		t.Fatalf("re-split: %v, %v; want %v", lanes, err, want)
	}
	// A merge may go to the shard of any sub-bucket: its unit is the override unit.
	lanes, err = planSplit(tab, SplitSpec{Tenant: "wide", Targets: []string{"a"}}, all)
	if err != nil || !reflect.DeepEqual(lanes, want) {
		t.Fatalf("merge: %v, %v; want %v", lanes, err, want)
	}
}

func TestNewSplitStatus(t *testing.T) {
	tab := routing.EvenTable(7, 16, "a", "b", "c")
	tab.Spreads = map[string][]string{"wide": {"a", "b"}}
	now := time.UnixMilli(1000)
	targets := []string{"b", "c"}
	s := newSplitStatus(SplitSpec{ID: "m", Tenant: "over", Targets: targets},
		routing.TenantUnit("over"), tab, []lane{{unit: routing.TenantUnit("over"), shard: "a", gen: 4}}, 9, now)
	if s.ID != "m" || s.State != OwnedA || s.ImportGen != 9 || !s.Created.Equal(now) || s.Source != "a" || s.SourceGen != 4 ||
		s.SplitFrom != nil || !slices.Equal(s.SplitTo, targets) {
		t.Fatalf("split of an override: %+v", s)
	}
	targets[0] = "changed"
	if s.SplitTo[0] != "b" {
		t.Fatal("SplitTo shares the spec's slice")
	}
	s = newSplitStatus(SplitSpec{ID: "m", Tenant: "wide", Targets: []string{"c", "a", "b"}},
		routing.TenantUnit("wide"), tab, make([]lane, 2), 9, now)
	if s.Source != "" || !slices.Equal(s.SplitFrom, []string{"a", "b"}) || len(s.lanes) != 2 {
		t.Fatalf("re-split: %+v", s)
	}
}

func TestSplitNext(t *testing.T) {
	tab := routing.EvenTable(7, 16, "a", "b", "c")
	tab.Overrides = map[string]string{"over": "a", "keep": "b"}
	tab.Spreads = map[string][]string{"wide": {"a", "b"}}
	nt := splitNext(tab, "over", []string{"b", "c"})
	if nt.Generation != tab.Generation+1 || nt.Overrides["over"] != "" || nt.Overrides["keep"] != "b" ||
		!slices.Equal(nt.Spreads["over"], []string{"b", "c"}) || !slices.Equal(nt.Spreads["wide"], []string{"a", "b"}) {
		t.Fatalf("split of an override: generation %d, overrides %v, spreads %v", nt.Generation, nt.Overrides, nt.Spreads)
	}
	if tab.Overrides["over"] != "a" || tab.Spreads["over"] != nil {
		t.Fatal("splitNext changed the table it started from")
	}
	nt = splitNext(tab, "wide", []string{"c", "a", "b"})
	if !slices.Equal(nt.Spreads["wide"], []string{"c", "a", "b"}) || nt.Overrides["over"] != "a" {
		t.Fatalf("re-split: overrides %v, spreads %v", nt.Overrides, nt.Spreads)
	}
}

func TestParseSplitLanes(t *testing.T) {
	m := map[string]string{"splitto": `["b","c","d"]`, "splitfrom": `["a","b"]`,
		"l0:srcgen": "4", "l0:copied": "10", "l0:logapplied": "2", "l0:cursor": "done", "l0:barrier": "5-0",
		"l1:srcgen": "6", "l1:copied": "7", "l1:logapplied": "1", "l1:applied": "3-0", "l1:snapshots": "2", "l1:appliedn": "9"}
	s := Status{Unit: routing.TenantUnit("wide")}
	if err := s.parseSplit(m); err != nil {
		t.Fatal(err)
	}
	want := []lane{
		{unit: routing.SpreadUnit("wide", 0), shard: "a", gen: 4, copied: 10, logApply: 2, cursor: "done", barrier: "5-0"},
		{unit: routing.SpreadUnit("wide", 1), shard: "b", gen: 6, copied: 7, logApply: 1, applied: "3-0", snapshots: 2, appliedN: 9},
	}
	if !reflect.DeepEqual(s.lanes, want) || s.Copied != 17 || s.LogApplied != 3 {
		t.Fatalf("lanes %+v, copied %d, log applied %d; want %+v, 17, 3", s.lanes, s.Copied, s.LogApplied, want)
	}
	delete(m, "l1:srcgen")
	if err := (&Status{Unit: routing.TenantUnit("wide")}).parseSplit(m); err == nil || err.Error() != "l1:srcgen" {
		t.Fatalf("a lane without its source generation: %v, want the error naming l1:srcgen", err)
	}
}

func TestShortOf(t *testing.T) {
	for _, tc := range []struct {
		barrier, applied string
		want             bool
	}{
		{"5-0", "5-0", false},
		{"5-3", "5-2", true},
		{"5-0", "3-9", true},
		{"5-0", "6-0", false},
		{"5-0", "", true},
		{"", "", false},
		{"5-0", "x", true},
	} {
		if got := shortOf(tc.barrier, tc.applied); got != tc.want {
			t.Errorf("shortOf(%q, %q) = %v, want %v", tc.barrier, tc.applied, got, tc.want)
		}
	}
}

func TestApplyArgs(t *testing.T) {
	r := &run{Status: Status{ID: "m1", ImportGen: 7}, epoch: 3}
	items := []item{{kind: 'r', field: "f", value: "1:l:v", exp: -5}, {kind: 'o', field: "op", value: "x", exp: 1200}}
	got := applyArgs(r, items, time.UnixMilli(1500))
	want := []any{"7", "m1", "1500", "3", "r", "f", "1:l:v", "0", "o", "op", "x", "1200"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("applyArgs = %q, want %q", got, want)
	}
}

func TestParseProbe(t *testing.T) {
	entries := []any{[]any{"5-0", []any{"k", "r", "f", "x"}}}
	p, err := parseProbe([]any{"4", "open", "5-0", "2-0", "9", "3", entries, "moved"})
	want := probeResult{own: routing.Ownership{Generation: 4, State: routing.StateOpen}, last: "5-0", maxDel: "2-0",
		added: 9, length: 3, mark: "moved", entries: []redis.XMessage{{ID: "5-0", Values: map[string]any{"k": "r", "f": "x"}}}}
	if err != nil || !reflect.DeepEqual(p, want) {
		t.Fatalf("parseProbe = %+v, %v; want %+v", p, err, want)
	}
	if p, err = parseProbe([]any{"4", "open", "5-0", "2-0", "9", "3", []any{}}); err != nil || p.mark != "" || p.entries != nil {
		t.Fatalf("parseProbe without mark or entries = %+v, %v", p, err)
	}
	for _, bad := range [][]any{
		{"4", "open"},
		{"4", "open", "5-0", "2-0", "9", "3", []any{"5-0"}},
		{"4", "open", "5-0", "2-0", "9", "3", []any{[]any{"5-0"}}},
	} {
		if _, err := parseProbe(bad); err == nil {
			t.Errorf("parseProbe(%v) took a malformed reply", bad)
		}
	}
}

func TestNextCursor(t *testing.T) {
	for _, tc := range []struct {
		phase string
		next  uint64
		want  string
	}{{"records", 12, "records:12"}, {"records", 0, "ops:0"}, {"ops", 7, "ops:7"}, {"ops", 0, "done"}} {
		if got := nextCursor(tc.phase, tc.next); got != tc.want {
			t.Errorf("nextCursor(%q, %d) = %q, want %q", tc.phase, tc.next, got, tc.want)
		}
	}
}

func TestPageItemsAndKeepItems(t *testing.T) {
	tomb := routingfmt.EncodeRecord(routing.Record{Version: 2, Deleted: true})
	items, need, idx := pageItems("records", []string{"a", "1:l:x", "b", tomb, "c", tomb})
	if len(items) != 3 || items[0].kind != 'r' || !reflect.DeepEqual(need, []string{"b", "c"}) || !reflect.DeepEqual(idx, []int{1, 2}) {
		t.Fatalf("records page: %+v, need %v, idx %v", items, need, idx)
	}
	// c left the expiry set since the page was read: not copied.
	kept := keepItems(items, idx, []float64{900, 0}, 100)
	want := []item{{kind: 'r', field: "a", value: "1:l:x"}, {kind: 'r', field: "b", value: tomb, exp: 900}}
	if !reflect.DeepEqual(kept, want) {
		t.Fatalf("kept records %+v, want %+v", kept, want)
	}
	items, need, idx = pageItems("ops", []string{"o1", "v1", "o2", "v2", "o3", "v3"})
	if !reflect.DeepEqual(need, []string{"o1", "o2", "o3"}) || !reflect.DeepEqual(idx, []int{0, 1, 2}) || items[2].kind != 'o' {
		t.Fatalf("ops page: %+v, need %v, idx %v", items, need, idx)
	}
	// o1 is older than the retry window's cutoff, o3's score is missing: only o2 travels.
	kept = keepItems(items, idx, []float64{100, 101}, 100)
	if want := []item{{kind: 'o', field: "o2", value: "v2", exp: 101}}; !reflect.DeepEqual(kept, want) {
		t.Fatalf("kept ops %+v, want %+v", kept, want)
	}
}

func TestCheckCacheSpec(t *testing.T) {
	newID := func() string { return "fresh" }
	_, err := checkCacheSpec(CacheSpec{ID: "m"}, newID)
	requireInvalid(t, err, "tenant:")
	_, err = checkCacheSpec(CacheSpec{Tenant: "t", ID: "m{1}"}, newID)
	requireInvalid(t, err, "migration ID must not contain braces")
	if id, err := checkCacheSpec(CacheSpec{Tenant: "t:{1}"}, newID); err != nil || id != "fresh" {
		t.Fatalf("checkCacheSpec = %q, %v; want the fresh ID", id, err)
	}
	if id, err := checkCacheSpec(CacheSpec{Tenant: "t", ID: "m1"}, newID); err != nil || id != "m1" {
		t.Fatalf("checkCacheSpec = %q, %v; want m1", id, err)
	}
}
