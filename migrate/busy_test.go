package migrate_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// A second carve-out, and a second split, of a tenant whose first one is copying (its
// driver paused there, its target claimed) are refused with ErrBusy naming the running
// migration, not with ErrOwnershipChanged pointing the operator at ClearClaim for a
// healthy migration; the first then finishes. Standalone and cluster shards.
func TestSecondMoveOfATenantAlreadyMovingIsBusyNamingTheHolder(t *testing.T) {
	for name, e := range splitEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			tenant := "busy-" + name
			bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
			a := e.openOwner(bu)
			b := other(a)
			m := newTModel()
			m.seed(t, e.client(), tenant, 50)
			requireBusy := func(err error, holder string) {
				t.Helper()
				require.ErrorIs(t, err, migrate.ErrBusy)
				require.NotErrorIs(t, err, migrate.ErrOwnershipChanged)
				var busy *migrate.BusyError
				require.ErrorAs(t, err, &busy)
				require.Equal(t, holder, busy.Holder)
				require.NotContains(t, err.Error(), "ClearClaim")
			}

			var second error
			var hit atomic.Bool
			co := e.coordinator(migrate.Options{BatchSize: 10, OnState: func(s migrate.Status) {
				if s.State == migrate.Copying && hit.CompareAndSwap(false, true) {
					_, second = e.coordinator(migrate.Options{}).StartCarve(context.Background(),
						migrate.CarveSpec{ID: "carve2-" + name, Tenant: tenant, Target: b})
				}
			}})
			st, err := co.Carve(ctx, migrate.CarveSpec{ID: "carve1-" + name, Tenant: tenant, Target: b})
			require.NoError(t, err)
			require.Equal(t, migrate.OwnedB, st.State)
			requireBusy(second, "carve1-"+name)

			hit.Store(false)
			targets := []string{"c", "d"}
			co = e.coordinator(migrate.Options{BatchSize: 10, OnState: func(s migrate.Status) {
				if s.State == migrate.Copying && hit.CompareAndSwap(false, true) {
					_, second = e.coordinator(migrate.Options{}).StartSplit(context.Background(),
						migrate.SplitSpec{ID: "split2-" + name, Tenant: tenant, Targets: targets})
				}
			}})
			st, err = co.Split(ctx, migrate.SplitSpec{ID: "split1-" + name, Tenant: tenant, Targets: targets})
			require.NoError(t, err)
			require.Equal(t, migrate.OwnedB, st.State)
			requireBusy(second, "split1-"+name)
			m.checkSpread(t, e, tenant)
		})
	}
}
