package routing_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/routing"
)

// TestProvisionPlanWithoutRedis checks Provision's plan step on records given in memory:
// missing records are planned on their assigned shard, an override's tenant is marked out of
// its bucket on the bucket's owner, and an owner elsewhere or a closed record refuses the
// whole plan.
func TestProvisionPlanWithoutRedis(t *testing.T) {
	tb := routing.EvenTable(1, 4, "a", "b")
	tb.SetOverride("fat", "b")
	units := tb.Units()
	names := []string{"a", "b"}
	empty := func() [][]routing.Ownership {
		return [][]routing.Ownership{make([]routing.Ownership, len(units)), make([]routing.Ownership, len(units))}
	}
	buckets, marks, claims, err := routing.PlanProvision(tb, names, empty())
	require.NoError(t, err)
	require.Len(t, buckets["a"], 2)
	require.Len(t, buckets["b"], 2)
	require.Equal(t, []routing.Unit{routing.TenantUnit("fat")}, claims["b"])
	fb := routing.BucketOf("fat", 4)
	require.Equal(t, []routing.Unit{{Kind: routing.KindBucket, Bucket: fb, Tenant: "fat"}}, marks[tb.BucketOwner(fb)])

	idx := func(u routing.Unit) int {
		for j, p := range units {
			if p.Unit == u {
				return j
			}
		}
		t.Fatalf("no unit %s", u)
		return -1
	}
	// Bucket 0 is assigned to "a" but open on "b": a migration, not a provision.
	found := empty()
	found[1][idx(routing.BucketUnit(0))] = routing.Ownership{Generation: 1, State: routing.StateOpen}
	_, _, _, err = routing.PlanProvision(tb, names, found)
	require.ErrorIs(t, err, routing.ErrOwnershipChanged)
	// Closed on its own shard: not provisionable.
	found = empty()
	found[0][idx(routing.BucketUnit(0))] = routing.Ownership{Generation: 1, State: routing.StateClosed}
	_, _, _, err = routing.PlanProvision(tb, names, found)
	require.ErrorIs(t, err, routing.ErrOwnershipChanged)
	// Already open where assigned: nothing to create for it.
	found = empty()
	found[0][idx(routing.BucketUnit(0))] = routing.Ownership{Generation: 1, State: routing.StateOpen}
	buckets, _, _, err = routing.PlanProvision(tb, names, found)
	require.NoError(t, err)
	require.NotContains(t, buckets["a"], routing.BucketUnit(0))
}
