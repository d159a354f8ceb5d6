package migrate_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// A fold-back's driver paused right after it journalled Copying, before its first batch,
// across a whole Cancel by another coordinator (which finds nothing of the tenant in the
// bucket to delete: the carve-out's copy was cleaned up), writes nothing into the bucket
// when it resumes: the cancel fenced the bucket for the tenant before it looked, so the
// driver's first batch is refused in the same script as its write (ErrFenced), and the
// bucket holds none of the tenant's records. Standalone and cluster shards.
func TestFoldBackCancelledWhileItsDriverIsPausedFencesTheBucketFirst(t *testing.T) {
	for name, e := range carveEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			tenant := "fold-fence-" + name
			bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
			tu := routing.TenantUnit(tenant)
			a := e.openOwner(bu)
			b := other(a)
			m := newTModel()
			m.seed(t, e.client(), tenant, 600)
			_, err := e.coordinator(migrate.Options{}).Carve(ctx, migrate.CarveSpec{ID: "carve-" + name, Tenant: tenant, Target: b})
			require.NoError(t, err)
			_, err = e.coordinator(migrate.Options{Grace: time.Nanosecond}).Cleanup(ctx, "carve-"+name)
			require.NoError(t, err)
			require.Empty(t, tenantFields(e.records(a, bu), tenant), "the carve-out's copy is gone from the bucket")

			var paused atomic.Bool
			var cancelled migrate.Status
			var cancelErr error
			driver := e.coordinator(migrate.Options{BatchSize: 500, OnState: func(s migrate.Status) {
				if s.State == migrate.Copying && s.Copied == 0 && paused.CompareAndSwap(false, true) {
					// The driver is paused here, across another coordinator's whole Cancel.
					cancelled, cancelErr = e.coordinator(migrate.Options{}).Cancel(context.Background(), s.ID)
				}
			}})
			_, err = driver.Fold(ctx, migrate.FoldSpec{ID: "fold-" + name, Tenant: tenant})
			require.True(t, paused.Load())
			require.NoError(t, cancelErr)
			require.Equal(t, migrate.Cancelled, cancelled.State)
			require.ErrorIs(t, err, migrate.ErrFenced, "the resumed driver is refused at its first batch")
			require.Zero(t, len(tenantFields(e.records(a, bu), tenant)), "the cancelled fold-back wrote nothing into the bucket")
			st, err := e.coordinator(migrate.Options{}).Status(ctx, "fold-"+name)
			require.NoError(t, err)
			require.Equal(t, migrate.Cancelled, st.State)
			require.Equal(t, b, e.table().Overrides[tenant])
			require.Equal(t, routing.StateOpen, e.own(b, tu).State)
			m.check(t, e, b, tu, tenant)
		})
	}
}
