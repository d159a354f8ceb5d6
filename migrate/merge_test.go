package migrate_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// A tenant split over four shards for a sale returns to one unit (a merge: the split in
// reverse) while it keeps writing through clients on the table of their start and through
// a routing Router, and a neighbour overridden onto one of the shards keeps writing too. On
// standalone shards the first driver loses the reply of one sub-bucket's barrier and a
// fresh coordinator resumes. A seat confirmation applied in a sub-bucket whose reply was
// lost is retried through the spread's table after the merge and replays its first result
// from the unit. At no instant is a sub-bucket open together with the unit; the neighbour
// never meets a stale route; the unit holds exactly the tenant's acknowledged history; the
// sub-buckets keep their closed copies until Cleanup; and the merged tenant splits again.
func TestMergeReturnsASpreadTenantToOneUnitWhileItKeepsWriting(t *testing.T) {
	for name, e := range splitEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			fat, neighbour := "merge-fat-"+name, "merge-neighbour-"+name
			e.override(fat, "a")
			e.override(neighbour, "c")
			m := newTModel()
			m.pace = time.Millisecond
			seeder := e.client()
			m.seed(t, seeder, fat, 400)
			m.seed(t, seeder, neighbour, 30)
			co := e.coordinator(migrate.Options{BatchSize: 100, LeaseTTL: 200 * time.Millisecond})
			_, err := co.Split(ctx, migrate.SplitSpec{ID: "split-" + name, Tenant: fat, Targets: []string{"a", "b", "c", "d"}})
			require.NoError(t, err)

			// The seat: applied in its sub-bucket, its reply lost; the client keeps the spread's table.
			seatClient := e.client()
			seat := routing.PutIf("seat-12", "alice", 0)
			first, _, err := seatClient.tdo(ctx, fat, "confirm-1", seat)
			require.NoError(t, err)
			m.ack(fat, "seat-12", seat, "confirm-1", first)

			stop := make(chan struct{})
			var stale, nstale atomic.Int64
			wait := splitWriters(t, e, m, 0, fat, neighbour, stop, &stale, &nstale)
			old := placement(e.table(), fat)
			target := "b" // also the shard of sub-bucket 1: the unit is another unit there
			unit := routing.TenantUnit(fat)
			obs := e.spreadObserver(old, []routing.Placement{{Unit: unit, Shard: target}})
			id := "merge-" + name
			before, acked := stale.Load(), m.acked()
			if name == "standalone" {
				// The first driver loses the reply of the barrier on the last sub-bucket.
				src := old[len(old)-1].Shard
				inj := faults.New()
				lossy := map[string]migrate.ShardClient{}
				for n, c := range e.clients {
					lossy[n] = c
				}
				lc := redis.NewClient(&redis.Options{Addr: e.clients[src].(*redis.Client).Options().Addr, Dialer: inj.Dialer(nil), MaxRetries: -1})
				defer lc.Close()
				lossy[src] = lc
				inj.DropReply(faults.Match{Command: "EVALSHA", Arg: ownScriptHash(t)}, 1)
				co1, err := migrate.New(e.control, migrate.Options{Shards: lossy, Prefix: e.prefix, BatchSize: 100, LeaseTTL: 200 * time.Millisecond})
				require.NoError(t, err)
				_, err = co1.Merge(ctx, migrate.MergeSpec{ID: id, Tenant: fat, Target: target})
				require.Error(t, err, "the barrier's reply was lost")
				require.Equal(t, int64(1), inj.Dropped())
			}
			var st migrate.Status
			if name == "standalone" {
				st, err = co.Resume(ctx, id)
			} else {
				st, err = co.Merge(ctx, migrate.MergeSpec{ID: id, Tenant: fat, Target: target})
			}
			require.NoError(t, err)
			require.Equal(t, migrate.OwnedB, st.State)
			require.Equal(t, []string{target}, st.SplitTo)
			require.Equal(t, []string{"a", "b", "c", "d"}, st.SplitFrom)
			require.Positive(t, st.Copied)
			tb := e.table()
			require.NotContains(t, tb.Spreads, fat, "the spread is gone")
			require.Equal(t, target, tb.Overrides[fat])
			require.Equal(t, st.FlipGen, tb.Generation)
			require.Equal(t, routing.StateOpen, e.own(target, unit).State)
			for _, p := range old {
				require.Equal(t, routing.StateClosed, e.own(p.Shard, p.Unit).State, "%s on %s", p.Unit, p.Shard)
			}
			require.Eventually(t, func() bool { return stale.Load() > before }, 30*time.Second, time.Millisecond,
				"the tenant's writers met the barrier")
			require.Eventually(t, func() bool { return m.acked() >= acked+50 }, 30*time.Second, time.Millisecond)
			obs.finish(t)
			close(stop)
			wait()
			require.Zero(t, nstale.Load(), "the neighbour never met a stale route")
			m.check(t, e, target, unit, fat)
			m.check(t, e, "c", routing.TenantUnit(neighbour), neighbour)

			// The lost seat confirmation, retried through the spread's table.
			again, n, err := seatClient.tdo(ctx, fat, "confirm-1", seat)
			require.NoError(t, err)
			require.Positive(t, n, "the retry met a closed sub-bucket first")
			require.Equal(t, routing.Result{Applied: true, Version: first.Version, Replayed: true}, again)

			// The closed sub-buckets keep their copies until Cleanup.
			_, err = co.Cleanup(ctx, id)
			require.ErrorIs(t, err, migrate.ErrGraceNotElapsed)
			cs, err := e.coordinator(migrate.Options{Grace: time.Nanosecond}).Cleanup(ctx, id)
			require.NoError(t, err)
			require.True(t, cs.Cleaned)
			for _, p := range old {
				require.Zero(t, e.dataKeys(p.Shard, p.Unit), "%s on %s is cleaned", p.Unit, p.Shard)
			}
			m.check(t, e, target, unit, fat)

			// And the tenant splits again (the next sale).
			_, err = co.Split(ctx, migrate.SplitSpec{ID: "resplit-" + name, Tenant: fat, Targets: []string{"c", "d"}})
			require.NoError(t, err)
			m.checkSpread(t, e, fat)
		})
	}
}

// A merge of a tenant that is not spread, to an unknown shard, or of a tenant in a bucket
// is refused with ErrInvalid and changes nothing; a merge cancelled while it copies leaves
// the spread where it was (every sub-bucket open, the unit empty and refusing, the locks
// free).
func TestMergeBadInputIsRefusedAndACancelKeepsTheSpread(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	ctx := testkit.Ctx(t)
	e.override("over", "a")
	co := e.coordinator(migrate.Options{BatchSize: 20})
	before := e.table()
	for _, tc := range []struct {
		spec migrate.MergeSpec
		want string
	}{
		{migrate.MergeSpec{Tenant: "over", Target: "b"}, "one unit already"},
		{migrate.MergeSpec{Tenant: "in-a-bucket", Target: "b"}, "carve it out first"},
		{migrate.MergeSpec{Tenant: "over", Target: "zz"}, `unknown shard "zz"`},
		{migrate.MergeSpec{Tenant: "", Target: "b"}, "tenant"},
	} {
		_, err := co.StartMerge(ctx, tc.spec)
		require.ErrorIs(t, err, migrate.ErrInvalid, "%+v", tc.spec)
		require.ErrorContains(t, err, tc.want)
	}
	require.Equal(t, before, e.table())

	tenant := "merge-cancel"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 200)
	_, err := co.Split(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"b", "c", "d"}})
	require.NoError(t, err)
	spread := placement(e.table(), tenant)
	var cancelled migrate.Status
	var cancelErr error
	var hit atomic.Bool
	coc := e.coordinator(migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
		if s.State == migrate.Copying && s.Copied > 0 && hit.CompareAndSwap(false, true) {
			cancelled, cancelErr = e.coordinator(migrate.Options{}).Cancel(ctx, s.ID)
		}
	}})
	_, err = coc.Merge(ctx, migrate.MergeSpec{ID: "m-cancel", Tenant: tenant, Target: "a"})
	require.ErrorIs(t, err, migrate.ErrCancelled)
	require.NoError(t, cancelErr)
	require.Equal(t, migrate.Cancelled, cancelled.State)
	require.Equal(t, []string{"b", "c", "d"}, e.table().Spreads[tenant])
	for _, p := range spread {
		require.Equal(t, routing.StateOpen, e.own(p.Shard, p.Unit).State)
	}
	require.NotEqual(t, routing.StateOpen, e.own("a", routing.TenantUnit(tenant)).State)
	require.Zero(t, len(e.records("a", routing.TenantUnit(tenant))), "the unit holds nothing")
	m.checkSpread(t, e, tenant)
	st, err := co.Merge(ctx, migrate.MergeSpec{ID: fmt.Sprintf("m-%s-again", tenant), Tenant: tenant, Target: "a"})
	require.NoError(t, err, "the locks are free")
	require.Equal(t, migrate.OwnedB, st.State)
	m.check(t, e, "a", routing.TenantUnit(tenant), tenant)
}
