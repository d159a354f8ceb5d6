package migrate_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// Operation IDs are per tenant, so a fold-back meets no conflict when a neighbour reused
// one of the tenant's IDs: acme, carved out, runs confirm-1 on its own unit while its
// neighbour, still in the bucket, runs its own confirm-1; Fold(acme) finishes, and in the
// bucket each tenant's retry of confirm-1 replays its own first result. The same for a
// carve-out of the neighbour afterwards (its confirm-1 travels, acme's stays). Standalone
// and cluster shards.
func TestFoldBackAndCarveOutWithANeighbourUsingTheSameOperationIDs(t *testing.T) {
	for name, e := range carveEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			acme := "acme-" + name
			neighbour := sameBucket(acme, "neighbour-"+name+"-", 1)[0]
			bu := routing.BucketUnit(routing.BucketOf(acme, testBuckets))
			a := e.openOwner(bu)
			b := other(a)
			cl := e.client()
			m := newTModel()
			m.seed(t, cl, acme, 20)
			m.seed(t, cl, neighbour, 20)
			co := e.coordinator(migrate.Options{Grace: time.Nanosecond})
			_, err := co.Carve(ctx, migrate.CarveSpec{ID: "carve-" + name, Tenant: acme, Target: b})
			require.NoError(t, err)

			cl = e.client()
			results := map[string]routing.Result{}
			for tenant, seat := range map[string]string{acme: "alice", neighbour: "nina"} {
				op := routing.PutIf("seat", seat, 0)
				res, _, err := cl.tdo(ctx, tenant, "confirm-1", op)
				require.NoError(t, err, tenant)
				require.True(t, res.Applied, tenant)
				m.ack(tenant, "seat", op, "confirm-1", res)
				results[tenant] = res
			}
			st, err := co.Fold(ctx, migrate.FoldSpec{ID: "fold-" + name, Tenant: acme})
			require.NoError(t, err)
			require.Equal(t, migrate.OwnedB, st.State)
			cl = e.client()
			for tenant, seat := range map[string]string{acme: "alice", neighbour: "nina"} {
				res, _, err := cl.tdo(ctx, tenant, "confirm-1", routing.PutIf("seat", seat, 0))
				require.NoError(t, err, tenant)
				require.True(t, res.Replayed, tenant)
				require.Equal(t, results[tenant].Version, res.Version, tenant)
			}
			m.check(t, e, a, bu, acme)
			recs := e.records(a, bu)
			require.Equal(t, "alice", recs[routingfmt.RecordField(acme, "seat")].Value)
			require.Equal(t, "nina", recs[routingfmt.RecordField(neighbour, "seat")].Value)

			// The neighbour leaves now; each keeps its own confirm-1.
			_, err = co.Carve(ctx, migrate.CarveSpec{ID: "carve-n-" + name, Tenant: neighbour, Target: b})
			require.NoError(t, err)
			cl = e.client()
			for tenant, seat := range map[string]string{acme: "alice", neighbour: "nina"} {
				res, _, err := cl.tdo(ctx, tenant, "confirm-1", routing.PutIf("seat", seat, 0))
				require.NoError(t, err, tenant)
				require.True(t, res.Replayed, tenant)
				require.Equal(t, results[tenant].Version, res.Version, tenant)
			}
		})
	}
}
