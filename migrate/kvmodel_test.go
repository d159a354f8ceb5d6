package migrate_test

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The sequential specification of routing's versioned record store, for porcupine: one
// register per (tenant, key) holding a version, a value and whether it is live, changed by
// Put, Delete and their conditional forms exactly as write.lua changes a record, and read
// by Get. A history of concurrent Router.Do and Router.Get calls is linearizable under this
// model when every call's reply could have come from one instant between its call and its
// return, in one order that every reply agrees with.

// kvKind is the kind of a call in a history.
type kvKind uint8

const (
	kvGet   kvKind = iota + 1 // Router.Get
	kvPut                     // Router.Do of routing.Put
	kvPutIf                   // Router.Do of routing.PutIf
	kvDel                     // Router.Do of routing.Delete
	kvDelIf                   // Router.Do of routing.DeleteIf
)

// kvInput is a call: its kind, the record, and for writes the value, the expected version
// of a conditional write and the operation ID.
type kvInput struct {
	Kind        kvKind
	Tenant, Key string
	Value       string
	Version     uint64
	OpID        string
}

// kvOutput is a reply. Unknown marks a call whose outcome the client never learned (its
// reply was lost, or it gave up): as in Jepsen, such a call stays in the history with its
// return at infinity ([never]), and the checker may place its effect at any instant after
// its call, or nowhere.
type kvOutput struct {
	Unknown  bool
	Found    bool   // Get: a record (live or tombstone) exists
	Deleted  bool   // Get: the record is a tombstone
	Value    string // Get: the live record's value
	Version  uint64 // Get: the record's version; writes: Result.Version (the version found on a mismatch)
	Applied  bool   // writes: Result.Applied
	Mismatch bool   // conditional writes: the reply was a *routing.VersionMismatchError
}

// never is the return time of a call whose outcome is unknown.
const never = int64(math.MaxInt64)

// kvState is one record: Version 0 is a key never written; Live false with a version is a
// tombstone.
type kvState struct {
	Version uint64
	Live    bool
	Value   string
}

// kvApply is write.lua's step 3: the state after a write and the reply it gives.
func kvApply(s kvState, in kvInput) (kvState, kvOutput) {
	seen := uint64(0)
	if s.Live {
		seen = s.Version
	}
	conditional := in.Kind == kvPutIf || in.Kind == kvDelIf
	switch {
	case conditional && seen != in.Version:
		return s, kvOutput{Mismatch: true, Version: seen}
	case in.Kind == kvPut || in.Kind == kvPutIf:
		return kvState{Version: s.Version + 1, Live: true, Value: in.Value}, kvOutput{Applied: true, Version: s.Version + 1}
	case s.Live:
		return kvState{Version: s.Version + 1}, kvOutput{Applied: true, Version: s.Version + 1}
	default:
		return s, kvOutput{} // a delete of an absent or deleted key
	}
}

func kvStep(state, input, output any) (bool, any) {
	s, in, out := state.(kvState), input.(kvInput), output.(kvOutput)
	if in.Kind == kvGet {
		if out.Unknown {
			return true, s
		}
		if s.Version == 0 {
			return !out.Found, s
		}
		return out.Found && out.Version == s.Version && out.Deleted == !s.Live && (!s.Live || out.Value == s.Value), s
	}
	next, want := kvApply(s, in)
	if out.Unknown {
		return true, next
	}
	return out.Applied == want.Applied && out.Mismatch == want.Mismatch && out.Version == want.Version, next
}

// kvModel is the porcupine model, partitioned by record: calls on different records never
// constrain each other, so each record's history is checked on its own.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			in := op.Input.(kvInput)
			k := in.Tenant + "\x00" + in.Key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return kvState{} },
	Step: kvStep,
	Equal: func(a, b any) bool {
		return a.(kvState) == b.(kvState)
	},
	DescribeOperation: func(input, output any) string { return describeKV(input.(kvInput), output.(kvOutput)) },
	DescribeState: func(state any) string {
		s := state.(kvState)
		switch {
		case s.Version == 0:
			return "absent"
		case !s.Live:
			return fmt.Sprintf("tombstone@%d", s.Version)
		}
		return fmt.Sprintf("%q@%d", s.Value, s.Version)
	},
	DescribeOperationMetadata: func(info any) string {
		if info == nil {
			return ""
		}
		return fmt.Sprint(info)
	},
}

func describeKV(in kvInput, out kvOutput) string {
	var call string
	switch in.Kind {
	case kvGet:
		call = fmt.Sprintf("get(%s/%s)", in.Tenant, in.Key)
	case kvPut:
		call = fmt.Sprintf("put(%s/%s, %q) %s", in.Tenant, in.Key, in.Value, in.OpID)
	case kvPutIf:
		call = fmt.Sprintf("putIf(%s/%s, %q, @%d) %s", in.Tenant, in.Key, in.Value, in.Version, in.OpID)
	case kvDel:
		call = fmt.Sprintf("del(%s/%s) %s", in.Tenant, in.Key, in.OpID)
	case kvDelIf:
		call = fmt.Sprintf("delIf(%s/%s, @%d) %s", in.Tenant, in.Key, in.Version, in.OpID)
	}
	switch {
	case out.Unknown:
		return call + " -> unknown"
	case in.Kind == kvGet && !out.Found:
		return call + " -> absent"
	case in.Kind == kvGet && out.Deleted:
		return fmt.Sprintf("%s -> tombstone@%d", call, out.Version)
	case in.Kind == kvGet:
		return fmt.Sprintf("%s -> %q@%d", call, out.Value, out.Version)
	case out.Mismatch:
		return fmt.Sprintf("%s -> mismatch, found @%d", call, out.Version)
	case out.Applied:
		return fmt.Sprintf("%s -> applied @%d", call, out.Version)
	}
	return call + " -> absent, not applied"
}

// requireLinearizable checks history against kvModel within timeout and fails t unless
// porcupine proves it linearizable. On a failure it writes porcupine's visualization (open
// it in a browser) to a file under t.TempDir and logs its path, the calls of the first record
// whose history has no linearization, and the names of the others.
func requireLinearizable(t testing.TB, history []porcupine.Operation, timeout time.Duration) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, timeout)
	if res == porcupine.Ok {
		return
	}
	path := filepath.Join(t.TempDir(), "linearizability.html")
	if err := porcupine.VisualizePath(kvModel, info, path); err != nil {
		t.Logf("visualization not written: %v", err)
	} else {
		t.Logf("visualization: %s", path)
	}
	shown := false
	for _, part := range kvModel.Partition(history) {
		if porcupine.CheckOperationsTimeout(kvModel, part, timeout) == porcupine.Ok {
			continue
		}
		in := part[0].Input.(kvInput)
		if shown {
			t.Logf("record %s/%s: %d calls, not linearizable either", in.Tenant, in.Key, len(part))
			continue
		}
		shown = true
		t.Logf("record %s/%s, %d calls:\n%s", in.Tenant, in.Key, len(part), describeHistory(part))
	}
	t.Fatalf("the history of %d calls is not linearizable (porcupine: %s)", len(history), res)
}

// describeHistory lists calls by call time, one a line: client, interval (ns since the
// start; "inf" for an unknown outcome), the call and its reply, and the metadata.
func describeHistory(ops []porcupine.Operation) string {
	ops = append([]porcupine.Operation(nil), ops...)
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	var b strings.Builder
	for _, op := range ops {
		ret := "inf"
		if op.Return != never {
			ret = fmt.Sprint(op.Return)
		}
		fmt.Fprintf(&b, "  c%-3d [%d, %s] %s", op.ClientId, op.Call, ret, describeKV(op.Input.(kvInput), op.Output.(kvOutput)))
		if op.Metadata != nil {
			fmt.Fprintf(&b, "  (%v)", op.Metadata)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// The checker can fail: hand-made histories of one record that no order of the calls
// explains (a read missing an acknowledged write, a read going back in time, two writes
// both admitted at one version, a lost write undone) are rejected, and histories that only
// look odd (a read seeing a write whose reply is still pending or was lost) are accepted.
func TestKVModelRejectsNonLinearizableHistories(t *testing.T) {
	const tn, k = "t", "k"
	call := func(client int, from, to int64, in kvInput, out kvOutput) porcupine.Operation {
		in.Tenant, in.Key = tn, k
		return porcupine.Operation{ClientId: client, Input: in, Call: from, Output: out, Return: to}
	}
	put := func(v string) kvInput { return kvInput{Kind: kvPut, Value: v, OpID: "op-" + v} }
	putIf := func(v string, at uint64) kvInput {
		return kvInput{Kind: kvPutIf, Value: v, Version: at, OpID: "op-" + v}
	}
	get := kvInput{Kind: kvGet}
	read := func(v string, at uint64) kvOutput { return kvOutput{Found: true, Value: v, Version: at} }
	applied := func(at uint64) kvOutput { return kvOutput{Applied: true, Version: at} }
	unknown := kvOutput{Unknown: true}
	for _, tc := range []struct {
		name         string
		linearizable bool
		history      []porcupine.Operation
	}{
		{"a read after an acknowledged write misses it", false, []porcupine.Operation{
			call(0, 0, 10, put("x"), applied(1)),
			call(1, 20, 30, get, kvOutput{}),
		}},
		{"a read goes back in time", false, []porcupine.Operation{
			call(0, 0, 10, put("x"), applied(1)),
			call(0, 20, 30, put("y"), applied(2)),
			call(1, 40, 50, get, read("y", 2)),
			call(2, 60, 70, get, read("x", 1)),
		}},
		{"two compare-and-sets both admitted at one version", false, []porcupine.Operation{
			call(0, 0, 10, put("x"), applied(1)),
			call(1, 20, 40, putIf("alice", 1), applied(2)),
			call(2, 25, 45, putIf("bob", 1), applied(2)),
		}},
		{"a write whose reply was lost is seen, then undone", false, []porcupine.Operation{
			call(0, 0, never, put("x"), unknown),
			call(1, 20, 30, get, read("x", 1)),
			call(2, 40, 50, get, kvOutput{}),
		}},
		{"a version skipped", false, []porcupine.Operation{
			call(0, 0, 10, put("x"), applied(1)),
			call(1, 20, 30, put("y"), applied(3)),
		}},
		{"concurrent calls in either order", true, []porcupine.Operation{
			call(0, 0, 50, put("x"), applied(1)),
			call(1, 10, 20, get, kvOutput{}),
			call(2, 30, 40, get, read("x", 1)),
		}},
		{"a write whose reply was lost is seen, and stays", true, []porcupine.Operation{
			call(0, 0, never, put("x"), unknown),
			call(1, 20, 30, get, kvOutput{}),
			call(1, 40, 50, get, read("x", 1)),
			call(2, 60, 70, putIf("y", 1), applied(2)),
		}},
		{"a write whose reply was lost never shows", true, []porcupine.Operation{
			call(0, 0, never, put("x"), unknown),
			call(1, 20, 30, put("y"), applied(1)),
			call(1, 40, 50, get, read("y", 1)),
		}},
		{"a delete and a mismatch", true, []porcupine.Operation{
			call(0, 0, 10, put("x"), applied(1)),
			call(0, 20, 30, kvInput{Kind: kvDel, OpID: "op-del"}, applied(2)),
			call(1, 40, 50, putIf("y", 1), kvOutput{Mismatch: true}),
			call(1, 60, 70, get, kvOutput{Found: true, Deleted: true, Version: 2}),
			call(2, 80, 90, putIf("z", 0), applied(3)),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := porcupine.CheckOperationsVerbose(kvModel, tc.history, 10*time.Second)
			want := porcupine.Illegal
			if tc.linearizable {
				want = porcupine.Ok
			}
			if res != want {
				t.Fatalf("porcupine says %s, want %s, for:\n%s", res, want, describeHistory(tc.history))
			}
		})
	}
}
