package migrate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// aofEnvs returns a standalone env (control and shard a on standalone servers) and a
// cluster env (control and shard a on the shared cluster); in both, shard b is a
// standalone server with AOF (appendfsync always), returned to be killed, restarted or
// restored.
func aofEnvs(t *testing.T) map[string]struct {
	e *env
	b *celebritytest.Server
} {
	out := map[string]struct {
		e *env
		b *celebritytest.Server
	}{}
	srv := celebritytest.Shards(t, 2)
	b1 := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	out["standalone"] = struct {
		e *env
		b *celebritytest.Server
	}{newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": b1.Client(t)}, routing.ShardOptions{}), b1}
	cl := celebritytest.SharedCluster(t)
	b2 := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	out["cluster"] = struct {
		e *env
		b *celebritytest.Server
	}{newEnvOver(t, cl.Client(t), map[string]migrate.ShardClient{"a": cl.Client(t), "b": b2.Client(t)}, routing.ShardOptions{}), b2}
	return out
}

// tenantOn returns a tenant named after base whose hash bucket the current table assigns to
// shard.
func tenantOn(e *env, base, shard string) string {
	tb := e.table()
	for i := 0; ; i++ {
		if c := fmt.Sprintf("%s%d", base, i); tb.BucketOwner(routing.BucketOf(c, tb.Buckets)) == shard {
			return c
		}
	}
}

// A tenant move's target shard restored to an earlier snapshot (taken when the copy began)
// between the verification and the flip: a carve-out's target unit, and a fold-back's
// bucket, come back without the note of the verified copy and without the records copied
// since. Neither is opened: the move aborts, the tenant stays served where it was (the
// carve-out's bucket unmarked again, the fold-back's unit reopened, the table unchanged), with
// its whole acknowledged history, and the fold-back's bucket holds nothing of the tenant.
// Standalone and cluster sources, an AOF standalone target.
func TestTenantMoveTargetRestoredBeforeTheFlipAborts(t *testing.T) {
	for name, x := range aofEnvs(t) {
		e, tgt := x.e, x.b
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			restoring := func() (migrate.Options, *bool) {
				var snap celebritytest.Snapshot
				var took, restored bool
				return migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
					switch {
					case s.State == migrate.Copying && !took:
						took = true // the target is claimed; nothing is copied yet
						snap = tgt.Snapshot(t)
					case s.State == migrate.ReadyB && !restored:
						restored = true
						tgt.RestoreSnapshot(t, snap)
					}
				}}, &restored
			}

			// A carve-out from a bucket on a into b.
			tenant := tenantOn(e, "restore-carve-"+name+"-", "a")
			bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
			e.openOwner(bu)
			m := newTModel()
			m.seed(t, e.client(), tenant, 200)
			o, restored := restoring()
			_, err := e.coordinator(o).Carve(ctx, migrate.CarveSpec{ID: "carve-" + name, Tenant: tenant, Target: "b"})
			require.True(t, *restored)
			require.ErrorIs(t, err, migrate.ErrAborted)
			require.ErrorIs(t, err, migrate.ErrOwnershipChanged)
			require.Empty(t, e.table().Overrides[tenant], "no table names the target")
			_, moved, err := e.shards["a"].Ownership(ctx, bu)
			require.NoError(t, err)
			require.NotContains(t, moved, tenant, "the bucket serves the tenant again")
			require.NotEqual(t, routing.StateOpen, e.own("b", routing.TenantUnit(tenant)).State)
			m.check(t, e, "a", bu, tenant)
			op := routing.Put("after", "x")
			res, stale, err := e.client().tdo(ctx, tenant, "after-carve", op)
			require.NoError(t, err)
			require.Zero(t, stale)
			m.ack(tenant, "after", op, "after-carve", res)

			// A fold-back from a unit on a into a bucket on b.
			tenant = tenantOn(e, "restore-fold-"+name+"-", "b")
			bu = routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
			tu := routing.TenantUnit(tenant)
			e.openOwner(bu)
			m.seed(t, e.client(), tenant, 200)
			co := e.coordinator(migrate.Options{Grace: time.Nanosecond})
			_, err = co.Carve(ctx, migrate.CarveSpec{ID: "carve2-" + name, Tenant: tenant, Target: "a"})
			require.NoError(t, err)
			_, err = co.Cleanup(ctx, "carve2-"+name)
			require.NoError(t, err)
			o, restored = restoring()
			_, err = e.coordinator(o).Fold(ctx, migrate.FoldSpec{ID: "fold-" + name, Tenant: tenant})
			require.True(t, *restored)
			require.ErrorIs(t, err, migrate.ErrAborted)
			require.ErrorIs(t, err, migrate.ErrOwnershipChanged)
			require.ErrorContains(t, err, "verified copy")
			require.Equal(t, "a", e.table().Overrides[tenant], "the tenant stays overridden")
			require.Equal(t, routing.StateOpen, e.own("a", tu).State, "the unit is open again")
			require.Zero(t, len(tenantFields(e.records("b", bu), tenant)), "the bucket holds nothing of the tenant")
			m.check(t, e, "a", tu, tenant)
			res, stale, err = e.client().tdo(ctx, tenant, "after-fold", op)
			require.NoError(t, err)
			require.Zero(t, stale)
			require.True(t, res.Applied)
		})
	}
}
