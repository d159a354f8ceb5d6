package routing_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// A Store that knows the shards (Router.Store, or NewStore with StoreOptions.Shards) refuses
// a table that newly places a tenant (override or spread) while the tenant still has data in
// its bucket, with ErrTenantHasData, and stores nothing: the tenant stays readable and
// writable where it was (the mark the check set is cleared). A tenant without data is
// placed; from the publication on, a client still on the older table is refused in the
// bucket (the mark was set before the check), so nothing of the tenant lands there between
// the check and Provision, which then opens the new unit. A placement published and
// reverted before Provision gives the tenant back to its bucket.
func TestPublishRefusesAPlacementThatWouldHideTheTenantsData(t *testing.T) {
	for _, how := range []string{"router store", "store with shards"} {
		t.Run(how, func(t *testing.T) {
			f := newFleet(t)
			r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
			ctx := testkit.Ctx(t)
			st := r.Store()
			if how == "store with shards" {
				shards := map[string]routing.ShardClient{}
				for name, c := range f.clients {
					shards[name] = c
				}
				var err error
				st, err = routing.NewStore(f.control, routing.StoreOptions{Prefix: f.prefix, Shards: shards})
				require.NoError(t, err)
			}
			t1 := routing.EvenTable(1, 4, "a", "b")
			t1.Shards = shardNames
			require.NoError(t, st.Publish(ctx, t1))
			awaitGen(t, r, 1)
			_, err := r.Provision(ctx)
			require.NoError(t, err)
			for i := 0; i < 5; i++ {
				_, err := r.Do(ctx, "shop", fmt.Sprint("put-", i), routing.Put(fmt.Sprint("k", i), "v"))
				require.NoError(t, err)
			}
			_, err = r.Do(ctx, "ops-only", "del", routing.Delete("never")) // only an op record
			require.NoError(t, err)

			for _, tenant := range []string{"shop", "ops-only"} {
				for _, place := range []func(tb *routing.Table){
					func(tb *routing.Table) { tb.SetOverride(tenant, "c") },
					func(tb *routing.Table) { tb.SetSpread(tenant, []string{"c", "k"}) },
				} {
					t2 := t1.Next()
					place(t2)
					err := st.Publish(ctx, t2)
					require.ErrorIs(t, err, routing.ErrTenantHasData, tenant)
					cur, err := st.Load(ctx)
					require.NoError(t, err)
					require.Equal(t, uint64(1), cur.Generation, "a refused table is not stored")
					b := uint32(hashing.Bucket(tenant, uint64(t1.Buckets)))
					_, moved, err := f.shard(t, t1.BucketOwner(b)).Ownership(ctx, routing.BucketUnit(b))
					require.NoError(t, err)
					require.NotContains(t, moved, tenant, "the check's mark is cleared")
				}
			}
			res, err := r.Do(ctx, "shop", "after", routing.Put("k9", "v"))
			require.NoError(t, err, "the tenant still writes in its bucket")
			require.True(t, res.Applied)

			// A placement published and reverted before Provision opened its unit gives the
			// tenant back to its bucket: the mark is cleared.
			undo := "undone"
			ub := uint32(hashing.Bucket(undo, uint64(t1.Buckets)))
			t2 := t1.Next()
			t2.SetOverride(undo, "c")
			require.NoError(t, st.Publish(ctx, t2))
			_, moved, err := f.shard(t, t1.BucketOwner(ub)).Ownership(ctx, routing.BucketUnit(ub))
			require.NoError(t, err)
			require.Contains(t, moved, undo, "marked by the placement")
			t3 := t2.Next()
			t3.SetOverride(undo, "")
			require.NoError(t, st.Publish(ctx, t3))
			awaitGen(t, r, 3)
			res, err = r.Do(ctx, undo, "back", routing.Put("k", "v"))
			require.NoError(t, err, "the tenant writes in its bucket again")
			require.True(t, res.Applied)

			// A tenant without data is placed; a client on the older table is refused in the
			// bucket from the publication on, and Provision opens the new unit.
			tenant := "fresh"
			b := uint32(hashing.Bucket(tenant, uint64(t1.Buckets)))
			t4 := t3.Next()
			t4.SetOverride(tenant, "c")
			require.NoError(t, st.Publish(ctx, t4))
			_, err = f.shard(t, t1.BucketOwner(b)).Exec(ctx, routing.BucketUnit(b), 3, tenant, "late", routing.Put("k", "v"))
			require.ErrorIs(t, err, routing.ErrStaleRoute, "a client on the older table is refused in the bucket")
			awaitGen(t, r, 4)
			_, err = r.Provision(ctx)
			require.NoError(t, err)
			res, err = r.Do(ctx, tenant, "first", routing.Put("k", "v"))
			require.NoError(t, err)
			require.True(t, res.Applied)
			got, ok, err := r.Get(ctx, tenant, "k")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, "v", got.Value)
		})
	}
}
