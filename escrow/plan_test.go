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
