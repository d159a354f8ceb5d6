package routing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/routing"
)

func TestProvisionNeverMovesAnOwnedUnit(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
	ctx := ctxT(t)
	st := f.store(t)
	t1 := routing.EvenTable(1, 4, "a", "b")
	t1.Shards = shardNames
	require.NoError(t, st.Publish(ctx, t1))
	awaitGen(t, r, 1)
	n, err := r.Provision(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	n, err = r.Provision(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "provisioning again creates nothing")

	// A table that hands bucket 0 to b without a migration: Provision refuses to claim it.
	t2 := t1.Next()
	t2.SetBucket(0, "b")
	t2.SetOverride("new-tenant", "c")
	require.NoError(t, st.Publish(ctx, t2))
	awaitGen(t, r, 2)
	_, err = r.Provision(ctx)
	require.ErrorIs(t, err, routing.ErrOwnershipChanged)
	o, _, err := f.shard(t, "b").Ownership(ctx, routing.BucketUnit(0))
	require.NoError(t, err)
	require.Equal(t, routing.Ownership{}, o)
	o, _, err = f.shard(t, "c").Ownership(ctx, routing.TenantUnit("new-tenant"))
	require.NoError(t, err)
	require.Equal(t, routing.Ownership{}, o, "nothing is created when any unit is refused")
}
