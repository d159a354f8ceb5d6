package migrate

import (
	"reflect"
	"testing"

	"github.com/celebrity-go/celebrity/routing"
)

// subField returns a record field of tenant that a width-w spread puts in sub-bucket want.
func subField(t *testing.T, tenant string, w, want int) string {
	t.Helper()
	for i := range 1000 {
		f := routing.RecordField(tenant, "k"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		if sub, ok := splitSub(tenant, f, w); ok && sub == want {
			return f
		}
	}
	t.Fatalf("no field of %q in sub-bucket %d of %d", tenant, want, w)
	return ""
}

func TestSplitAskRoutesRecordsAndAsksEveryHolderForOps(t *testing.T) {
	f0, f1 := subField(t, "ten", 2, 0), subField(t, "ten", 2, 1)
	other := routing.RecordField("else", "k")
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
	keys := routing.UnitKeys{Tombstones: "src:t", OpExpiry: "src:o"}
	s0 := &holder{sh: &shard{name: "s0"}, k: keys}
	d0 := &holder{sh: &shard{name: "d0"}, k: routing.UnitKeys{Tombstones: "dst:t", OpExpiry: "dst:o"}}
	tomb := routing.EncodeRecord(routing.Record{Version: 3, Deleted: true})
	live := routing.EncodeRecord(routing.Record{Version: 3, Value: "v"})
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
