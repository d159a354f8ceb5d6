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
