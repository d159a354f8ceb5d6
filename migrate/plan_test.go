package migrate

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/routing"
)

// planTable is a table over shards a, b and c (c is not named in the table) with tenant
// "over" overridden onto b and tenant "wide" spread over a and b.
func planTable() *routing.Table {
	t := routing.EvenTable(7, 16, "a", "b")
	t.Overrides = map[string]string{"over": "b"}
	t.Spreads = map[string][]string{"wide": {"a", "b"}}
	return t
}

func knownShards(names ...string) func(string) bool {
	return func(s string) bool {
		for _, n := range names {
			if n == s {
				return true
			}
		}
		return false
	}
}

// tenantOn returns a tenant whose bucket the table assigns to shard.
func tenantOn(t *testing.T, tab *routing.Table, shard string) string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		tenant := "t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if tab.BucketOwner(routing.BucketOf(tenant, tab.Buckets)) == shard {
			return tenant
		}
	}
	t.Fatalf("no tenant on shard %q", shard)
	return ""
}

func requireInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v does not wrap ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}

func TestCheckTenantSpecRefusesBadInput(t *testing.T) {
	newID := func() string { return "fresh" }
	for _, tc := range []struct{ name, tenant, id, want string }{
		{"empty tenant", "", "m1", "tenant:"},
		{"tenant not UTF-8", "t\xff", "m1", "not valid UTF-8"},
		{"ID with braces", "t1", "m{1}", "migration ID must be 1..200 bytes without braces"},
		{"ID too long", "t1", strings.Repeat("m", 201), "migration ID must be 1..200 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := checkTenantSpec(tc.tenant, tc.id, newID)
			requireInvalid(t, err, tc.want)
		})
	}
	u, id, err := checkTenantSpec("t:{1}", "", newID)
	if err != nil || id != "fresh" || u != routing.TenantUnit("t:{1}") {
		t.Fatalf("checkTenantSpec(t:{1}, \"\") = %v, %q, %v; want the tenant unit, the fresh ID, no error", u, id, err)
	}
}

func TestPlanCarveRefusesBadInput(t *testing.T) {
	tab := planTable()
	onA := tenantOn(t, tab, "a")
	all := knownShards("a", "b", "c")
	for _, tc := range []struct {
		name string
		spec CarveSpec
		has  func(string) bool
		want string
	}{
		{"overridden tenant", CarveSpec{Tenant: "over", Target: "a"}, all, `tenant "over" is already overridden onto shard "b"`},
		{"spread tenant", CarveSpec{Tenant: "wide", Target: "a"}, all, `tenant "wide" is spread`},
		{"wrong source", CarveSpec{Tenant: onA, Source: "b", Target: "b"}, all, `not on the given source "b"`},
		{"target is source", CarveSpec{Tenant: onA, Target: "a"}, all, `target "a" is the source`},
		{"unknown target", CarveSpec{Tenant: onA, Target: "z"}, all, `unknown target shard "z"`},
		{"empty target", CarveSpec{Tenant: onA}, all, `unknown target shard ""`},
		{"no source client", CarveSpec{Tenant: onA, Target: "b"}, knownShards("b"), `no client for source shard "a"`},
		{"target not in table", CarveSpec{Tenant: onA, Target: "c"}, all, `target shard "c" is not named in the table (generation 7)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planCarve(tab, tc.spec, tc.has)
			requireInvalid(t, err, tc.want)
		})
	}
	p, err := planCarve(tab, CarveSpec{Tenant: onA, Source: "a", Target: "b"}, all)
	want := tenantPlan{unit: routing.TenantUnit(onA), bucket: routing.BucketUnit(routing.BucketOf(onA, 16)), source: "a", target: "b"}
	if err != nil || p != want {
		t.Fatalf("planCarve = %+v, %v; want %+v", p, err, want)
	}
}

func TestPlanFoldRefusesBadInput(t *testing.T) {
	tab := planTable()
	onA := tenantOn(t, tab, "a")
	tab.Overrides[onA] = "b"
	all := knownShards("a", "b")
	for _, tc := range []struct {
		name string
		spec FoldSpec
		has  func(string) bool
		want string
	}{
		{"spread tenant", FoldSpec{Tenant: "wide"}, all, `tenant "wide" is spread`},
		{"not overridden", FoldSpec{Tenant: "plain"}, all, `tenant "plain" is not overridden`},
		{"wrong source", FoldSpec{Tenant: onA, Source: "a"}, all, `not onto the given source "a"`},
		{"wrong target", FoldSpec{Tenant: onA, Target: "b"}, all, `not on the given target "b"`},
		{"no source client", FoldSpec{Tenant: onA}, knownShards("a"), `no client for source shard "b"`},
		{"no target client", FoldSpec{Tenant: onA}, knownShards("b"), `no client for target shard "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planFold(tab, tc.spec, tc.has)
			requireInvalid(t, err, tc.want)
		})
	}
	p, err := planFold(tab, FoldSpec{Tenant: onA, Source: "b", Target: "a"}, all)
	want := tenantPlan{unit: routing.TenantUnit(onA), bucket: routing.BucketUnit(routing.BucketOf(onA, 16)), source: "b", target: "a"}
	if err != nil || p != want {
		t.Fatalf("planFold = %+v, %v; want %+v", p, err, want)
	}
}

func TestCheckOpenRefusesAClosedOrNewerRecord(t *testing.T) {
	tab := planTable()
	u := routing.BucketUnit(3)
	if err := checkOpen("source", "a", u, routing.Ownership{State: routing.StateOpen, Generation: 7}, tab); err != nil {
		t.Fatalf("open at the table's generation: %v", err)
	}
	for _, own := range []routing.Ownership{
		{State: routing.StateClosed, Generation: 7},
		{State: routing.StateOpen, Generation: 8},
	} {
		err := checkOpen("target", "b", u, own, tab)
		if !errors.Is(err, ErrOwnershipChanged) || !strings.Contains(err.Error(), `target "b" holds`) {
			t.Fatalf("checkOpen(%v) = %v; want ErrOwnershipChanged naming the target", own, err)
		}
	}
}

func TestPlanCacheMoveRefusesBadInput(t *testing.T) {
	tab := planTable()
	onA := tenantOn(t, tab, "a")
	all := knownShards("a", "b", "c")
	for _, tc := range []struct {
		name string
		spec CacheSpec
		has  func(string) bool
		want string
	}{
		{"spread tenant", CacheSpec{Tenant: "wide", Target: "a"}, all, `tenant "wide" is spread`},
		{"unknown target", CacheSpec{Tenant: onA, Target: "z"}, all, `unknown target shard "z"`},
		{"target not in table", CacheSpec{Tenant: onA, Target: "c"}, all, `unknown target shard "c"`},
		{"no source client", CacheSpec{Tenant: onA, Target: "b"}, knownShards("b"), `no client for source shard "a"`},
		{"target is current shard", CacheSpec{Tenant: "over", Target: "b"}, all, `target "b" is the tenant's current shard`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := planCacheMove(tab, tc.spec, tc.has)
			requireInvalid(t, err, tc.want)
		})
	}
	if src, had, err := planCacheMove(tab, CacheSpec{Tenant: onA, Target: "b"}, all); err != nil || src != "a" || had {
		t.Fatalf("bucket tenant: planCacheMove = %q, %v, %v; want a, false, nil", src, had, err)
	}
	if src, had, err := planCacheMove(tab, CacheSpec{Tenant: "over", Target: "a"}, all); err != nil || src != "b" || !had {
		t.Fatalf("overridden tenant: planCacheMove = %q, %v, %v; want b, true, nil", src, had, err)
	}
}

func TestWarmTallyExpiries(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	for _, tc := range []struct {
		name            string
		ttls            []time.Duration
		oldExp, halfExp int64
	}{
		{"none warmed", nil, 0, 0},
		{"one key", []time.Duration{5 * time.Second}, 1_005_000, 1_005_000},
		{"latest and middle", []time.Duration{3 * time.Second, time.Second, 2 * time.Second}, 1_003_000, 1_002_000},
		{"one forever key", []time.Duration{time.Second, -1, 2 * time.Second}, 0, 1_002_000},
		{"mostly forever", []time.Duration{time.Second, -1, -1}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := warmTally{now: now}
			for _, ttl := range tc.ttls {
				restore := w.add(ttl)
				if (ttl < 0 && restore != 0) || (ttl >= 0 && restore != ttl) {
					t.Fatalf("add(%v) = %v", ttl, restore)
				}
			}
			oldExp, halfExp := w.expiries()
			if w.warmed != len(tc.ttls) || oldExp != tc.oldExp || halfExp != tc.halfExp {
				t.Fatalf("warmed %d, expiries %d, %d; want %d, %d, %d", w.warmed, oldExp, halfExp, len(tc.ttls), tc.oldExp, tc.halfExp)
			}
		})
	}
}

func TestPlanFlip(t *testing.T) {
	tab := planTable() // generation 7
	s := Status{ID: "m1", Unit: routing.BucketUnit(3), Source: "a", Target: "b", ImportGen: 8}
	imp := routing.Ownership{Generation: 8, State: routing.StateImporting}
	open := func(g uint64) routing.Ownership { return routing.Ownership{Generation: g, State: routing.StateOpen} }
	for _, tc := range []struct {
		name   string
		owner  string
		own    routing.Ownership
		opened bool
		want   flipPlan
	}{
		{"importing, table on the source", "a", imp, false, flipPlan{open: true, to: open(8)}},
		{"importing, table on the target", "b", imp, false, flipPlan{open: true, to: open(7)}},
		{"opened by this call", "a", open(8), true, flipPlan{}},
		{"opened earlier", "a", open(8), false, flipPlan{checkOurs: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planFlip(tab, tc.owner, s, tc.own, tc.opened)
			if err != nil || p != tc.want {
				t.Fatalf("planFlip = %+v, %v; want %+v", p, err, tc.want)
			}
		})
	}
	for _, own := range []routing.Ownership{open(9), {Generation: 8, State: routing.StateClosed}, {}} {
		if _, err := planFlip(tab, "a", s, own, false); !errors.Is(err, ErrOwnershipChanged) {
			t.Fatalf("planFlip(%v) = %v; want ErrOwnershipChanged", own, err)
		}
	}
	tab.SetBucket(3, "c")
	if _, err := flipOwner(tab, s); !errors.Is(err, ErrOwnershipChanged) || !strings.Contains(err.Error(), `to "c" during the flip`) {
		t.Fatalf("flipOwner with the unit on a third shard = %v; want ErrOwnershipChanged", err)
	}
}

func TestRunOutcome(t *testing.T) {
	for _, st := range []State{OwnedA, Copying, CatchingUp, ClosedA, ReadyB, Cancelling} {
		if final, err := (&run{Status: Status{State: st}}).outcome(); final || err != nil {
			t.Fatalf("outcome(%s) = %v, %v; want a step to run", st, final, err)
		}
	}
	cause := errors.New("source lost")
	for _, tc := range []struct {
		r    run
		want error
		text string
	}{
		{run{Status: Status{State: OwnedB}}, nil, ""},
		{run{Status: Status{State: Cancelled, Reason: "asked"}}, ErrCancelled, "asked"},
		{run{Status: Status{State: Aborted, Reason: "journal reason"}}, ErrAborted, "journal reason"},
		{run{Status: Status{State: Aborted, Reason: "journal reason"}, cause: cause}, cause, "source lost"},
		{run{Status: Status{ID: "m1", State: "Bogus"}}, nil, `unknown state "Bogus"`},
	} {
		final, err := tc.r.outcome()
		if !final || (tc.want != nil && !errors.Is(err, tc.want)) || (tc.text == "") != (err == nil) ||
			(err != nil && !strings.Contains(err.Error(), tc.text)) {
			t.Fatalf("outcome(%s) = %v, %v; want final with %v (%q)", tc.r.State, final, err, tc.want, tc.text)
		}
	}
}

func TestClassifySettle(t *testing.T) {
	v := &verifier{a: newSide(), b: newSide(), dirty: map[string]bool{}}
	put := func(key, a, b string) {
		v.a.set(key, a)
		v.b.set(key, b)
		v.dirty[key] = true
	}
	put("rsame", "1:v:x", "1:v:x") // equal: settled
	put("rboth", "1:v:x", "2:v:y") // both hold it, differently
	put("ooA", "op", "")           // source-only op record
	put("rtA", "5:t:", "")         // source-only tombstone
	put("ooB", "", "op")           // target-only op record
	put("rtB", "", "5:t:")         // target-only tombstone
	put("rlive", "", "1:v:x")      // target-only live record
	held, differ := classifySettle(v)
	slices.Sort(differ)
	want := [4][]string{{"ooA"}, {"rtA"}, {"ooB"}, {"rtB"}}
	if !reflect.DeepEqual(held, want) || !slices.Equal(differ, []string{"both", "live"}) {
		t.Fatalf("classifySettle = %v, %v; want %v, [both live]", held, differ, want)
	}
}

func TestStepArgs(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	got := stepArgs([]State{OwnedA, Copying}, CatchingUp, true, "m1", 9, 30*time.Second, now, []string{"cursor", "done"})
	want := []any{"OwnedA,Copying", "CatchingUp", "1", "m1", "9", "30000", "updated", "1700000000123", "cursor", "done"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stepArgs = %q; want %q", got, want)
	}
	got = stepArgs(nil, OwnedB, false, "m2", 0, time.Second, now, nil)
	want = []any{"", "OwnedB", "0", "m2", "-", "1000", "updated", "1700000000123"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stepArgs without epoch = %q; want %q", got, want)
	}
}

func TestVerifierAddNewAndCompare(t *testing.T) {
	v := &verifier{a: newSide(), b: newSide(), dirty: map[string]bool{}}
	if got := v.a.addNew("r", []string{"f1", "1:v:x", "f2", "1:v:y"}); !slices.Equal(got, []string{"f1", "f2"}) {
		t.Fatalf("addNew = %v; want [f1 f2]", got)
	}
	// A scan may return a field again: it is neither recorded nor read twice.
	if got := v.a.addNew("r", []string{"f2", "1:v:changed", "f3", "1:v:z"}); !slices.Equal(got, []string{"f3"}) {
		t.Fatalf("addNew again = %v; want [f3]", got)
	}
	v.compare("r", []string{"f1", "f2", "f3"}, []any{"1:v:x", "2:v:other", nil}, v.a, v.b)
	if !reflect.DeepEqual(v.dirty, map[string]bool{"rf2": true, "rf3": true}) {
		t.Fatalf("dirty = %v; want rf2 and rf3", v.dirty)
	}
	if v.b.get("rf1") != "1:v:x" || v.b.get("rf2") != "2:v:other" || v.b.get("rf3") != "" || v.a.get("rf2") != "1:v:y" {
		t.Fatalf("sides = %v, %v", v.a.m, v.b.m)
	}
}

func TestAcquireArgsAndHeldWait(t *testing.T) {
	got := acquireArgs("tok", 8*time.Second, true, "OwnedA,Copying", []string{"Cancelling", "reason", "asked"})
	want := []any{"tok", "8000", "1", "OwnedA,Copying", "Cancelling", "reason", "asked"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("acquireArgs = %q; want %q", got, want)
	}
	if got := acquireArgs("tok", time.Second, false, "", nil); !reflect.DeepEqual(got, []any{"tok", "1000", "0", ""}) {
		t.Fatalf("acquireArgs without force = %q", got)
	}
	if w := heldWait(99, 8*time.Second); w != 100*time.Millisecond {
		t.Fatalf("heldWait(99ms left) = %v; want 100ms", w)
	}
	if w := heldWait(60_000, 8*time.Second); w != 2*time.Second+time.Millisecond {
		t.Fatalf("heldWait(60s left) = %v; want a quarter of the lease, 2.001s", w)
	}
}

func TestFoldFlipOwner(t *testing.T) {
	tab := planTable()
	onA := tenantOn(t, tab, "a")
	b := routing.BucketOf(onA, 16)
	s := Status{Unit: routing.TenantUnit(onA), Into: routing.BucketUnit(b), Source: "b", Target: "a"}
	tab.Overrides[onA] = "b"
	if owner, err := foldFlipOwner(tab, s); err != nil || owner != "b" {
		t.Fatalf("override on the source: %q, %v", owner, err)
	}
	delete(tab.Overrides, onA)
	if owner, err := foldFlipOwner(tab, s); err != nil || owner != "" {
		t.Fatalf("override gone: %q, %v", owner, err)
	}
	tab.Overrides[onA] = "c"
	if _, err := foldFlipOwner(tab, s); !errors.Is(err, ErrOwnershipChanged) {
		t.Fatalf("override on a third shard: %v; want ErrOwnershipChanged", err)
	}
	delete(tab.Overrides, onA)
	tab.SetBucket(b, "b")
	if _, err := foldFlipOwner(tab, s); !errors.Is(err, ErrOwnershipChanged) || !strings.Contains(err.Error(), `to "b" during the fold-back's flip`) {
		t.Fatalf("bucket moved off the target: %v; want ErrOwnershipChanged", err)
	}
}

func TestPurgeItems(t *testing.T) {
	if got := purgeItems("o", []string{"op1", "v1", "op2", "v2"}); !slices.Equal(got, []string{"o", "op1", "o", "op2"}) {
		t.Fatalf("purgeItems = %q", got)
	}
	if got := purgeItems("r", nil); len(got) != 0 {
		t.Fatalf("purgeItems of an empty page = %q", got)
	}
}

func TestParseStatusNamesMalformedFields(t *testing.T) {
	m := map[string]string{"id": "m1", "state": "Copying", "bucket": "3", "srcgen": "x", "created": "1700000000123"}
	m["kind"] = strconv.Itoa(int(routing.KindBucket))
	_, err := parseStatus(m)
	if err == nil || !strings.Contains(err.Error(), "[srcgen]") {
		t.Fatalf("parseStatus with a bad srcgen = %v; want an error naming srcgen", err)
	}
	m["srcgen"] = "7"
	s, err := parseStatus(m)
	if err != nil || s.SourceGen != 7 || s.Created.UnixMilli() != 1_700_000_000_123 || !s.Updated.IsZero() || s.Unit != routing.BucketUnit(3) {
		t.Fatalf("parseStatus = %+v, %v", s, err)
	}
}
