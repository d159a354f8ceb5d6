package escrow

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func snap(owner string, free []int) ledgerSnapshot {
	return ledgerSnapshot{owner: owner, exists: true, free: free, held: map[int]string{}, jobs: map[string]string{},
		out: map[string]transferRecord{}, in: map[string]transferRecord{}}
}

// TestPlanReconcileAnswersLostTransfersAsTheSourceActed checks the plan alone: a transfer
// into the reconciled owner that its source aborted is refused again; one its source still
// has frozen is accepted with only the permits nobody else has; one its source completed
// is accepted the same way; grants made after the confirmed point are freed.
func TestPlanReconcileAnswersLostTransfersAsTheSourceActed(t *testing.T) {
	a := snap("a", []int{1, 2, 3})
	a.out["aborted"] = transferRecord{S: "aborted", To: "b", P: permitList{9}}
	a.out["frozen"] = transferRecord{S: "frozen", To: "b", P: permitList{4, 5}}
	a.out["done"] = transferRecord{S: "done", To: "b", P: permitList{6, 7}}
	a.free = append(a.free, 5) // permit 5 of "frozen" came back to a another way
	b := snap("b", []int{8})
	b.held[10] = "early"
	b.jobs["early"] = "10:4"
	b.held[11] = "late"
	b.jobs["late"] = "11:12"
	plan, cancel := planReconcile("b", map[string]ledgerSnapshot{"a": a, "b": b}, []string{"a", "b"}, 10)
	require.Empty(t, cancel)
	require.Equal(t, []planRefuse{{T: "aborted", From: "a"}}, plan.Refuse)
	require.ElementsMatch(t, []planAdd{{T: "frozen", From: "a", P: []int{4}}, {T: "done", From: "a", P: []int{6, 7}}}, plan.Add)
	require.Equal(t, []string{"late"}, plan.Release, "token 12 is above the confirmed point 10")
	require.Empty(t, plan.Drop)
}

func TestDivergenceIsTheLastCommonStep(t *testing.T) {
	z := func(seq float64, id string) redis.Z { return redis.Z{Score: seq, Member: id} }
	chain := []redis.Z{z(3, "c"), z(4, "d"), z(5, "e")}
	require.Equal(t, int64(4), divergence(chain, []redis.Z{z(3, "c"), z(4, "d"), z(5, "x"), z(6, "y")}))
	require.Equal(t, int64(5), divergence(chain, []redis.Z{z(4, "d"), z(5, "e")}))
	require.Equal(t, int64(2), divergence(chain, []redis.Z{z(7, "q")}), "no common step: below the chain's oldest")
	require.Greater(t, divergence(nil, []redis.Z{z(7, "q")}), int64(1<<60), "no chain: everything counts")
}

// TestPlanReconcileTrimsAnOutgoingTransferWhosePermitsMovedOn checks the trim step alone: an
// outgoing transfer frozen in the reconciled ledger, not accepted by its target, keeps only
// the permits nobody else has and is cancelled afterwards; one its target accepted is left.
func TestPlanReconcileTrimsAnOutgoingTransferWhosePermitsMovedOn(t *testing.T) {
	a := snap("a", nil)
	a.out["moved-on"] = transferRecord{S: "frozen", To: "b", P: permitList{1, 2}}
	a.out["accepted"] = transferRecord{S: "frozen", To: "b", P: permitList{3}}
	b := snap("b", []int{1, 3})
	b.in[inKey("a", "accepted")] = transferRecord{S: "accepted", From: "a", P: permitList{3}}
	plan, cancel := planReconcile("a", map[string]ledgerSnapshot{"a": a, "b": b}, []string{"a", "b"}, 0)
	require.Equal(t, []string{"moved-on"}, cancel)
	require.Equal(t, []planTrim{{T: "moved-on", P: []int{2}}}, plan.Trim)
	require.Empty(t, plan.Drop)
	require.Empty(t, plan.Add)
}

// TestPlacementIgnoresTheTransfersOwnPlace checks that a permit frozen in transfer T counts
// as elsewhere for everyone but T itself.
func TestPlacementIgnoresTheTransfersOwnPlace(t *testing.T) {
	a := snap("a", []int{1})
	a.out["T"] = transferRecord{S: "frozen", To: "b", P: permitList{2}}
	pl := placeOthers("b", map[string]ledgerSnapshot{"a": a, "b": snap("b", nil)}, []string{"a", "b"})
	require.True(t, pl.elsewhere(1, ""))
	require.True(t, pl.elsewhere(2, ""))
	require.False(t, pl.elsewhere(2, "T\x00a\x00T"))
	require.False(t, pl.elsewhere(3, ""))
}

func TestFrozenIDsListsOnlyUnsettledTransfersSorted(t *testing.T) {
	s := snap("a", nil)
	s.out["z"] = transferRecord{S: "frozen"}
	s.out["a"] = transferRecord{S: "frozen"}
	s.out["done"] = transferRecord{S: "done"}
	s.out["aborted"] = transferRecord{S: "aborted"}
	require.Equal(t, []string{"a", "z"}, frozenIDs(s))
}

// TestRestoreClaimAnswers checks how RestoreLost reads the register's answer to its claim:
// only its own claim, for its own owner, lets it put permits back.
func TestRestoreClaimAnswers(t *testing.T) {
	got, err := claimed(reply{status: "ok"}, "r1", "a", []int{3, 4})
	require.NoError(t, err)
	require.Equal(t, []int{3, 4}, got)
	got, err = claimed(reply{status: "resume", vals: []any{"a", "[5]"}}, "r1", "a", []int{3, 4})
	require.NoError(t, err)
	require.Equal(t, []int{5}, got, "a resumed claim puts back what it recorded")
	_, err = claimed(reply{status: "resume", vals: []any{"b", "[5]"}}, "r1", "a", nil)
	require.ErrorIs(t, err, ErrConflict, "claimed for another owner")
	_, err = claimed(reply{status: "busy", vals: []any{"r0"}}, "r1", "a", nil)
	require.ErrorIs(t, err, ErrConflict)
	_, err = claimed(reply{status: "moved", vals: []any{int64(2)}}, "r1", "a", nil)
	require.ErrorIs(t, err, ErrConflict)
	_, err = claimed(reply{status: "what"}, "r1", "a", nil)
	require.Error(t, err)
	require.Equal(t, []planAdd{{T: "r1", From: restoreSource, P: []int{7}}}, restorePlan("r1", []int{7}).Add)
}

// TestJudgeTailFencesEveryOtherHistory walks the cases of confirm's re-read of a ledger's
// log: only a log that still holds the step and passes through the chain's top confirms it.
func TestJudgeTailFencesEveryOtherHistory(t *testing.T) {
	mine := step{seq: 7, id: "s7"}
	top := step{seq: 9, id: "s9"}
	log := []step{top, {seq: 10, id: "s10"}}
	for _, tc := range []struct {
		name   string
		tail   tailOf
		status string
		want   tailVerdict
	}{
		{"marked fenced", tailOf{fenced: true, seq: 10, mineID: "s7", low: 1, steps: log}, "behind", tailFenced},
		{"another step at mine's sequence", tailOf{seq: 10, mineID: "x7", low: 1, steps: log}, "behind", tailDiverged},
		{"mine trimmed from the log", tailOf{seq: 10, mineID: "", low: 8, steps: log}, "behind", tailStepGone},
		{"ledger below the chain's top", tailOf{seq: 8, mineID: "s7", low: 1, steps: nil}, "behind", tailDiverged},
		{"log no longer reaches the top", tailOf{seq: 10, mineID: "s7", low: 1, steps: []step{{seq: 10, id: "s10"}}}, "behind", tailShort},
		{"history does not pass through the top", tailOf{seq: 10, mineID: "s7", low: 1, steps: []step{{seq: 9, id: "other"}}}, "behind", tailDiverged},
		{"behind, same history", tailOf{seq: 10, mineID: "s7", low: 1, steps: log}, "behind", tailConfirmed},
		{"gap, same history", tailOf{seq: 10, mineID: "s7", low: 1, steps: log}, "gap", tailMore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, judgeTail(tc.tail, mine, top, tc.status))
		})
	}
}

func TestJudgeConfigNamesEvictionAndWeakDurability(t *testing.T) {
	for _, tc := range []struct {
		cfg             map[string]string
		evicts, durable bool
	}{
		{map[string]string{"maxmemory-policy": "noeviction", "appendonly": "yes", "appendfsync": "always"}, false, true},
		{map[string]string{"maxmemory-policy": "volatile-lru", "appendonly": "yes", "appendfsync": "always"}, false, true},
		{map[string]string{"maxmemory-policy": "allkeys-lru", "appendonly": "yes", "appendfsync": "always"}, true, true},
		{map[string]string{"maxmemory-policy": "noeviction", "appendonly": "yes", "appendfsync": "everysec"}, false, false},
		{map[string]string{"appendonly": "no"}, false, false},
	} {
		evicts, durable := judgeConfig(tc.cfg)
		require.Equal(t, tc.evicts, evicts, "%v", tc.cfg)
		require.Equal(t, tc.durable, durable, "%v", tc.cfg)
	}
}

// TestBuildReportPlacesEveryPermitOnce checks the audit alone: a transfer its target
// accepted counts at the target only, one it has not counts in transfer, and a permit in two
// places or in none is reported.
func TestBuildReportPlacesEveryPermitOnce(t *testing.T) {
	a := snap("a", []int{1, 2})
	a.out["T1"] = transferRecord{S: "frozen", To: "b", P: permitList{3}}
	a.out["T2"] = transferRecord{S: "frozen", To: "b", P: permitList{4}}
	b := snap("b", []int{3, 2})
	b.in[inKey("a", "T1")] = transferRecord{S: "accepted", From: "a", P: permitList{3}}
	b.held[5] = "job"
	b.jobs["job"] = "5:9"
	rep := buildReport(6, []ledgerSnapshot{a, b}, map[string]int64{"a": 0, "b": 0}, DefaultLeaseSkew)
	require.Equal(t, 2, rep.Free, "permits 1 and 3")
	require.Equal(t, 1, rep.Held)
	require.Equal(t, 1, rep.InTransfer, "permit 4 of T2")
	require.Equal(t, []int{6}, rep.Missing)
	require.Equal(t, []PermitPlaces{{Permit: 2, Places: []string{"free@a", "free@b"}}}, rep.Duplicated)
	require.Len(t, rep.Pending, 2)
	require.True(t, rep.Pending[0].Accepted)
	require.False(t, rep.Pending[1].Accepted)
	require.Empty(t, rep.Problems)
	require.False(t, rep.Clean())
}
