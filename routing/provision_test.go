package routing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

func TestProvisionNeverMovesAnOwnedUnit(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
	ctx := testkit.Ctx(t)
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

func TestProvisionedOverrideAndSpreadKeepStaleBucketWritesOut(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
	ctx := testkit.Ctx(t)
	st := f.store(t)
	t1 := routing.EvenTable(1, 4, "a", "b")
	t1.Shards = shardNames
	require.NoError(t, st.Publish(ctx, t1))
	awaitGen(t, r, 1)
	_, err := r.Provision(ctx)
	require.NoError(t, err)

	// Generation 2 gives two new tenants units of their own, before any data was written.
	t2 := t1.Next()
	t2.SetOverride("solo", "c")
	t2.SetSpread("wide", []string{"c", "k"})
	require.NoError(t, st.Publish(ctx, t2))
	awaitGen(t, r, 2)
	n, err := r.Provision(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	// A client still holding generation 1 routes both tenants to their hash buckets: the
	// buckets must refuse them, or their writes would land where nobody reads them.
	for _, tenant := range []string{"solo", "wide"} {
		b := uint32(hashing.Bucket(tenant, uint64(t1.Buckets)))
		owner := f.shard(t, t1.BucketOwner(b))
		_, err := owner.Exec(ctx, routing.BucketUnit(b), 1, tenant, "stale-"+tenant, routing.Put("k", "v"))
		require.ErrorIs(t, err, routing.ErrStaleRoute, tenant)
		_, ok, err := owner.Get(ctx, routing.BucketUnit(b), 1, tenant, "k")
		require.ErrorIs(t, err, routing.ErrStaleRoute, tenant)
		require.False(t, ok)
		res, err := r.Do(ctx, tenant, "fresh-"+tenant, routing.Put("k", "v"))
		require.NoError(t, err, tenant)
		require.True(t, res.Applied)
	}
	// Other tenants of those buckets are untouched.
	other := tenantInBucket(t, uint32(hashing.Bucket("solo", uint64(t1.Buckets))), t1.Buckets, "other")
	_, err = r.Do(ctx, other, "other-1", routing.Put("k", "v"))
	require.NoError(t, err)
	n, err = r.Provision(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "provisioning again creates nothing")
}

// migrate leaves "importing" or "cancelled" records on a target; Provision must not treat
// them (or a closed record) on a unit's assigned shard as provisioned.
func TestProvisionRefusesANonOpenRecordOnTheAssignedShard(t *testing.T) {
	for _, state := range []routing.State{routing.StateImporting, "cancelled", routing.StateClosed} {
		t.Run(string(state), func(t *testing.T) {
			f := newFleet(t)
			r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
			ctx := testkit.Ctx(t)
			t1 := routing.EvenTable(1, 4, "a", "b")
			t1.Shards = shardNames
			t1.SetOverride("solo", "c")
			require.NoError(t, f.store(t).Publish(ctx, t1))
			awaitGen(t, r, 1)
			u := routing.BucketUnit(1)
			held := routing.Ownership{Generation: 1, State: state}
			_, err := f.shard(t, t1.BucketOwner(1)).Transition(ctx, u, routing.Ownership{}, held)
			require.NoError(t, err)

			_, err = r.Provision(ctx)
			require.ErrorIs(t, err, routing.ErrOwnershipChanged)
			o, _, err := f.shard(t, t1.BucketOwner(1)).Ownership(ctx, u)
			require.NoError(t, err)
			require.Equal(t, held, o)
			o, _, err = f.shard(t, "c").Ownership(ctx, routing.TenantUnit("solo"))
			require.NoError(t, err)
			require.Equal(t, routing.Ownership{}, o, "nothing is created")
		})
	}
}
