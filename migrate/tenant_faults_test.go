package migrate_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// A split whose source's change log is trimmed past the position the split has applied
// (a tiny log cap and a burst of the tenant's writes while the snapshot is copied) aborts,
// as documented: the tenant stays on its override with its whole acknowledged history, the
// targets hold nothing and refuse, the locks are free, and the split started again
// (the burst over) finishes. Standalone and cluster sources.
func TestSplitAbortsWhenASourceLogIsTrimmedPastItsPosition(t *testing.T) {
	for name, e := range splitEnvs(t, routing.ShardOptions{LogMaxLen: 20}) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			tenant := "trimmed-" + name
			e.override(tenant, "a")
			cl := e.client()
			m := newTModel()
			m.seed(t, cl, tenant, 200)
			var burst atomic.Bool
			co := e.coordinator(migrate.Options{BatchSize: 50, OnState: func(s migrate.Status) {
				if s.State == migrate.Copying && burst.CompareAndSwap(false, true) {
					m.seed(t, cl, tenant, 400) // 480 log entries under a cap of 20
				}
			}})
			targets := []string{"c", "d"}
			st, err := co.Split(ctx, migrate.SplitSpec{ID: "trim-" + name, Tenant: tenant, Targets: targets})
			require.True(t, burst.Load())
			require.ErrorIs(t, err, migrate.ErrAborted)
			require.ErrorContains(t, err, "lost entries")
			require.Equal(t, migrate.Aborted, st.State)
			require.Equal(t, "a", e.table().Overrides[tenant], "the tenant stays on its override")
			require.Equal(t, routing.StateOpen, e.own("a", routing.TenantUnit(tenant)).State)
			for j, s := range targets {
				u := routing.SpreadUnit(tenant, uint32(j))
				require.NotEqual(t, routing.StateOpen, e.own(s, u).State)
				require.Zero(t, e.dataKeys(s, u), "target %s/%d holds nothing", s, j)
			}
			m.check(t, e, "a", routing.TenantUnit(tenant), tenant)

			st, err = e.coordinator(migrate.Options{BatchSize: 50}).Split(ctx, migrate.SplitSpec{ID: "again-" + name, Tenant: tenant, Targets: targets})
			require.NoError(t, err, "the locks are free and the split starts again")
			require.Equal(t, migrate.OwnedB, st.State)
			m.checkSpread(t, e, tenant)
		})
	}
}

// Cleanup after a fold-back deletes the override unit's closed copy on its source and
// leaves the bucket's records; after a split it deletes the override unit's copy, and after
// a re-split every old sub-bucket's, leaving the new spread whole. Every source keeps its
// closed ownership record; a Cleanup before the grace is refused. Standalone and cluster
// shards.
func TestCleanupAfterAFoldBackASplitAndAReSplit(t *testing.T) {
	for name, e := range splitEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			now := time.Now()
			clock := func() time.Time { return now }
			co := e.coordinator(migrate.Options{Grace: time.Hour, Clock: clock})
			requireCleaned := func(id string, sources ...routing.Placement) {
				t.Helper()
				_, err := co.Cleanup(ctx, id)
				require.ErrorIs(t, err, migrate.ErrGraceNotElapsed)
				for _, p := range sources {
					require.NotZero(t, e.dataKeys(p.Shard, p.Unit), "%s on %s is kept until the grace", p.Unit, p.Shard)
				}
				now = now.Add(2 * time.Hour)
				st, err := co.Cleanup(ctx, id)
				require.NoError(t, err)
				require.True(t, st.Cleaned)
				for _, p := range sources {
					require.Zero(t, e.dataKeys(p.Shard, p.Unit), "%s on %s is cleaned up", p.Unit, p.Shard)
					require.Equal(t, routing.StateClosed, e.own(p.Shard, p.Unit).State, "the closed record stays")
				}
			}

			// A fold-back.
			tenant := "cleanup-fold-" + name
			bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
			a := e.openOwner(bu)
			b := other(a)
			m := newTModel()
			m.seed(t, e.client(), tenant, 100)
			_, err := co.Carve(ctx, migrate.CarveSpec{ID: "carve-" + name, Tenant: tenant, Target: b})
			require.NoError(t, err)
			now = now.Add(2 * time.Hour)
			_, err = co.Cleanup(ctx, "carve-"+name)
			require.NoError(t, err)
			require.Empty(t, tenantFields(e.records(a, bu), tenant), "the carve-out's copy is gone from the bucket")
			_, err = co.Fold(ctx, migrate.FoldSpec{ID: "fold-" + name, Tenant: tenant})
			require.NoError(t, err)
			requireCleaned("fold-"+name, routing.Placement{Unit: routing.TenantUnit(tenant), Shard: b})
			m.check(t, e, a, bu, tenant)

			// A split of an override, then a re-split.
			tenant = "cleanup-split-" + name
			e.override(tenant, "a")
			m.seed(t, e.client(), tenant, 100)
			_, err = co.Split(ctx, migrate.SplitSpec{ID: "split-" + name, Tenant: tenant, Targets: []string{"c", "d"}})
			require.NoError(t, err)
			requireCleaned("split-"+name, routing.Placement{Unit: routing.TenantUnit(tenant), Shard: "a"})
			m.checkSpread(t, e, tenant)
			_, err = co.Split(ctx, migrate.SplitSpec{ID: "resplit-" + name, Tenant: tenant, Targets: []string{"d", "c", "b"}})
			require.NoError(t, err)
			requireCleaned("resplit-"+name, routing.Placement{Unit: routing.SpreadUnit(tenant, 0), Shard: "c"},
				routing.Placement{Unit: routing.SpreadUnit(tenant, 1), Shard: "d"})
			m.checkSpread(t, e, tenant)
		})
	}
}

// A carve-out whose target shard (AOF, appendfsync always) is killed and restarted in the
// middle of the copy, and a fold-back whose source shard is killed and restarted in the
// middle of its catch-up, finish (resumed by a new process if the driver stopped on the
// lost connection) with the tenant's whole acknowledged history. Standalone and cluster
// buckets.
func TestTenantMovesSurviveAnAOFRestartOfTheirShard(t *testing.T) {
	for name, x := range aofEnvs(t) {
		e, srv := x.e, x.b
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			tenant := tenantOn(e, "aof-"+name+"-", "a")
			bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
			tu := routing.TenantUnit(tenant)
			e.openOwner(bu)
			m := newTModel()
			m.seed(t, e.client(), tenant, 200)
			restartAt := func(state migrate.State) (migrate.Options, *atomic.Bool) {
				var done atomic.Bool
				return migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
					if s.State == state && done.CompareAndSwap(false, true) {
						srv.Restart(t)
					}
				}}, &done
			}
			// finish resumes migration id in a new process (a no-op for one that finished) and
			// returns its status; err is what its first driver returned.
			finish := func(err error, id string) migrate.Status {
				t.Helper()
				st, rerr := e.coordinator(migrate.Options{}).Resume(ctx, id)
				require.NoError(t, rerr, "resumed after the first driver returned %v", err)
				return st
			}
			o, done := restartAt(migrate.Copying)
			_, err := e.coordinator(o).Carve(ctx, migrate.CarveSpec{ID: "carve-" + name, Tenant: tenant, Target: "b"})
			require.True(t, done.Load())
			require.Equal(t, migrate.OwnedB, finish(err, "carve-"+name).State)
			m.check(t, e, "b", tu, tenant)

			op := routing.Put("after", "x")
			res, _, err := e.client().tdo(ctx, tenant, "after-carve", op)
			require.NoError(t, err)
			m.ack(tenant, "after", op, "after-carve", res)
			o, done = restartAt(migrate.CatchingUp)
			_, err = e.coordinator(o).Fold(ctx, migrate.FoldSpec{ID: "fold-" + name, Tenant: tenant})
			require.True(t, done.Load())
			require.Equal(t, migrate.OwnedB, finish(err, "fold-"+name).State)
			m.check(t, e, "a", bu, tenant)
		})
	}
}

// A carve-out and then a fold-back of a tenant whose bucket lives on a cluster master that
// fails over (a coordinated CLUSTER FAILOVER to its replica) in the middle of each copy
// finish with the tenant's whole acknowledged history: the stock cluster client follows the
// new slot map, and every step re-checks the shards instead of trusting a lost reply.
func TestTenantMovesSurviveAFailoverOfTheBucketsMaster(t *testing.T) {
	celebritytest.Long(t)
	ctl := celebritytest.Standalone(t)
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Replicas: true})
	b := celebritytest.Standalone(t)
	e := newEnvOver(t, ctl.Client(t), map[string]migrate.ShardClient{"a": cl.Client(t), "b": b.Client(t)}, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	tenant := tenantOn(e, "failover-", "a")
	bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
	e.openOwner(bu)
	m := newTModel()
	m.seed(t, e.client(), tenant, 200)
	failover := func() {
		master := cl.MasterOf(routingfmt.Keys(e.shards["a"].Keys().Tag(bu)).Own)
		for i, s := range cl.Masters() {
			if s == master {
				cl.Failover(t, i)
				return
			}
		}
		t.Fatal("no master holds the bucket")
	}
	at := func() (migrate.Options, *atomic.Bool) {
		var done atomic.Bool
		return migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
			if s.State == migrate.Copying && done.CompareAndSwap(false, true) {
				failover()
			}
		}}, &done
	}
	o, done := at()
	st, err := e.coordinator(o).Carve(ctx, migrate.CarveSpec{ID: "carve", Tenant: tenant, Target: "b"})
	require.True(t, done.Load())
	if err != nil {
		st, err = e.coordinator(migrate.Options{}).Resume(ctx, "carve")
	}
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	m.check(t, e, "b", routing.TenantUnit(tenant), tenant)

	o, done = at()
	st, err = e.coordinator(o).Fold(ctx, migrate.FoldSpec{ID: "fold", Tenant: tenant})
	require.True(t, done.Load())
	if err != nil {
		st, err = e.coordinator(migrate.Options{}).Resume(ctx, "fold")
	}
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	m.check(t, e, "a", bu, tenant)
}
