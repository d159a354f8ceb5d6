package migrate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

func TestCancelWhileDrivingStopsTheDriverAndLeavesNoTraceOnTarget(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(1)
	e.openOwner(u)
	cl := e.client()
	m := newModel()
	m.seed(t, cl, u, 1000)

	var co *migrate.Coordinator
	var cancelled migrate.Status
	var cancelErr error
	co = e.coordinator(migrate.Options{BatchSize: 100, OnState: func(s migrate.Status) {
		if s.State == migrate.Copying && s.Copied > 0 && cancelled.ID == "" {
			// An operator cancels from elsewhere while this driver is copying.
			cancelled, cancelErr = e.coordinator(migrate.Options{}).Cancel(context.Background(), s.ID)
		}
	}})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "b"})
	require.NoError(t, cancelErr)
	require.Equal(t, migrate.Cancelled, cancelled.State)
	require.ErrorIs(t, err, migrate.ErrCancelled)
	require.Equal(t, migrate.Cancelled, st.State)
	require.Equal(t, "cancelled by operator", st.Reason)
	require.Zero(t, e.dataKeys("b", u))
	require.Equal(t, routing.Ownership{Generation: 2, State: "cancelled"}, e.own("b", u))
	require.Equal(t, routing.Ownership{Generation: 1, State: routing.StateOpen}, e.own("a", u))
	require.Equal(t, uint64(1), e.table().Generation, "no table was published")
	m.check(t, e, "a", u)

	// The source keeps taking writes, and a later migration of the unit succeeds.
	_, err = cl.do(ctx, u, "course", fmt.Sprintf("m%d-after-cancel", m.id), routing.Put("after", "1"))
	require.NoError(t, err)
	st, err = co.Migrate(ctx, migrate.Spec{Unit: u, Target: "b"})
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	got := e.records("b", u)
	require.Equal(t, "1", got[routingfmt.RecordField("course", "after")].Value)
	require.Len(t, got, 1001)
}

func TestCancelAfterSourceClosedIsRefusedAndResumeFinishes(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(2)
	e.openOwner(u)
	m := newModel()
	m.seed(t, e.client(), u, 50)
	dctx, kill := context.WithCancel(ctx)
	co := e.coordinator(migrate.Options{OnState: func(s migrate.Status) {
		if s.State == migrate.ClosedA && s.Barrier != "" {
			kill()
		}
	}})
	st, err := co.Migrate(dctx, migrate.Spec{Unit: u, Target: "b"})
	require.ErrorIs(t, err, context.Canceled)
	_, err = co.Cancel(ctx, st.ID)
	require.ErrorIs(t, err, migrate.ErrCancelRefused)
	now, err := co.Status(ctx, st.ID)
	require.NoError(t, err)
	require.Equal(t, migrate.ClosedA, now.State, "a refused cancel changes nothing")
	require.Equal(t, routing.StateClosed, e.own("a", u).State)
	st, err = co.Resume(ctx, st.ID)
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	m.check(t, e, "b", u)
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(4)
	e.openOwner(u)
	co := e.coordinator(migrate.Options{})
	for _, tc := range []struct {
		name string
		spec migrate.Spec
		want error
	}{
		{"unknown bucket", migrate.Spec{Unit: routing.BucketUnit(testBuckets), Target: "b"}, migrate.ErrInvalid},
		{"unknown tenant", migrate.Spec{Unit: routing.TenantUnit("nobody"), Target: "b"}, migrate.ErrInvalid},
		{"malformed unit", migrate.Spec{Unit: routing.Unit{Kind: 9}, Target: "b"}, migrate.ErrInvalid},
		{"unknown shard", migrate.Spec{Unit: u, Target: "zz"}, migrate.ErrInvalid},
		{"target is source", migrate.Spec{Unit: u, Target: "a"}, migrate.ErrInvalid},
		{"wrong source", migrate.Spec{Unit: u, Source: "b", Target: "b"}, migrate.ErrInvalid},
		{"source not open", migrate.Spec{Unit: routing.BucketUnit(5), Target: "b"}, migrate.ErrOwnershipChanged},
		{"braces in id", migrate.Spec{ID: "x{y}", Unit: u, Target: "b"}, migrate.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := co.Start(ctx, tc.spec)
			require.ErrorIs(t, err, tc.want)
			t.Log(err)
		})
	}
	first, err := co.Start(ctx, migrate.Spec{ID: "first", Unit: u, Target: "b"})
	require.NoError(t, err)
	_, err = co.Start(ctx, migrate.Spec{ID: "second", Unit: u, Target: "b"})
	var busy *migrate.BusyError
	require.ErrorAs(t, err, &busy)
	require.ErrorIs(t, err, migrate.ErrBusy)
	require.Equal(t, "first", busy.Holder)
	_, err = co.Status(ctx, "second")
	require.ErrorIs(t, err, migrate.ErrNotFound)
	e.openOwner(routing.BucketUnit(6))
	_, err = co.Start(ctx, migrate.Spec{ID: "first", Unit: routing.BucketUnit(6), Target: "b"})
	require.ErrorIs(t, err, migrate.ErrInvalid, "a used ID")
	require.Zero(t, e.dataKeys("b", u))
	require.Equal(t, routing.StateNone, e.own("b", u).State, "Start touches no shard")
	require.Equal(t, uint64(1), e.table().Generation)
	st, err := co.Cancel(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, migrate.Cancelled, st.State)

	for _, o := range []migrate.Options{{BatchSize: -1}, {BatchSize: 20000}, {CloseLag: -1}, {Grace: -1}, {Prefix: "a{b"}} {
		o.Shards = e.clients
		_, err := migrate.New(e.control, o)
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), "migrate: Options."), err.Error())
	}
	_, err = migrate.New(e.control, migrate.Options{})
	require.ErrorContains(t, err, "Options.Shards")
}

// The course-72 scenario: a seat confirmation is applied on A, its reply is lost, the bucket
// moves to B, and the client retries through its stale route with the same op ID.
func TestLostSeatConfirmationIsFoundOnTheNewOwner(t *testing.T) {
	srv := celebritytest.Shards(t, 3)
	inj := faults.New()
	lossy := srv[1].Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil); o.MaxRetries = -1 })
	e := newEnv(t, routing.ShardOptions{})
	// The client's view of shard a loses replies; the coordinator's does not.
	ca, err := routing.NewShard("a", lossy, routing.ShardOptions{Prefix: e.prefix})
	require.NoError(t, err)
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(7) // course 72's bucket
	e.openOwner(u)
	route := e.table()

	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "confirm-72-alice"}, 1)
	_, err = ca.Exec(ctx, u, route.Generation, "course-72", "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.Error(t, err, "the reply was lost")
	require.Equal(t, int64(1), inj.Dropped())
	// The confirmation was applied on A.
	require.Equal(t, "alice", e.records("a", u)[routingfmt.RecordField("course-72", "seat:17")].Value)

	st, err := e.coordinator(migrate.Options{}).Migrate(ctx, migrate.Spec{Unit: u, Target: "b"})
	require.NoError(t, err)

	// The client retries through its stale route: A refuses, the client reloads the table
	// and retries on B with the same op ID.
	_, err = ca.Exec(ctx, u, route.Generation, "course-72", "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.ErrorIs(t, err, routing.ErrStaleRoute)
	route = e.table()
	require.Equal(t, st.FlipGen, route.Generation)
	require.Equal(t, "b", route.Owner(u))
	res, err := e.shards["b"].Exec(ctx, u, route.Generation, "course-72", "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.NoError(t, err)
	require.Equal(t, routing.Result{Applied: true, Version: 1, Replayed: true}, res, "the original confirmation")
	recs := e.records("b", u)
	require.Len(t, recs, 1, "no second seat")
	require.Equal(t, routing.Record{Version: 1, Value: "alice"}, recs[routingfmt.RecordField("course-72", "seat:17")])
	// Another client cannot take the same seat.
	_, err = e.shards["b"].Exec(ctx, u, route.Generation, "course-72", "confirm-72-bob", routing.PutIf("seat:17", "bob", 0))
	require.ErrorIs(t, err, routing.ErrVersionMismatch)
}

func TestDeleteDuringCopyThenLateSnapshotCopyStaysDeleted(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(8)
	require.Equal(t, "b", e.openOwner(u))
	cl := e.client()
	m := newModel()
	m.seed(t, cl, u, 300)
	victim := routingfmt.RecordField("course", "seed-42")

	co := e.coordinator(migrate.Options{BatchSize: 1000})
	late := false
	migrate.SetBeforeApply(co, func(ctx context.Context, id string, items []migrate.Item, apply func([]migrate.Item) error) {
		for _, it := range items {
			if late || !it.Record || it.Field != victim {
				continue
			}
			late = true
			require.Equal(t, "1:l:s42", it.Value, "the snapshot read the live version")
			// While this snapshot batch is in flight, the key is deleted on the source, and
			// the change log reaches the target first.
			res, err := cl.do(ctx, u, "course", fmt.Sprintf("m%d-delete-42", m.id), routing.Delete("seed-42"))
			require.NoError(t, err)
			m.ack("seed-42", routing.Delete("seed-42"), fmt.Sprintf("m%d-delete-42", m.id), res)
			require.NoError(t, apply([]migrate.Item{{Record: true, Field: victim, Value: "2:t:", Exp: 1 << 50}}))
		}
	})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "a"})
	require.NoError(t, err)
	require.True(t, late)
	require.Positive(t, co.Stats().Refused, "the late copy of version 1 was refused")
	require.Equal(t, routing.Record{Version: 2, Deleted: true}, e.records("a", u)[victim])
	m.check(t, e, "a", u)
	_, found, err := e.shards["a"].Get(ctx, u, st.FlipGen, "course", "seed-42")
	require.NoError(t, err)
	require.True(t, found)
	rec, _, _ := e.shards["a"].Get(ctx, u, st.FlipGen, "course", "seed-42")
	require.True(t, rec.Deleted, "the key stays deleted")
}

func TestConflictingEqualVersionAbortsTheMigration(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(9)
	e.openOwner(u)
	m := newModel()
	m.seed(t, e.client(), u, 20)
	co := e.coordinator(migrate.Options{})
	field := routingfmt.RecordField("course", "seed-3")
	migrate.SetBeforeApply(co, func(ctx context.Context, id string, items []migrate.Item, apply func([]migrate.Item) error) {
		// Something else wrote the same version with other content on the target.
		_ = apply([]migrate.Item{{Record: true, Field: field, Value: "1:l:forged"}})
	})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "a"})
	require.ErrorIs(t, err, migrate.ErrAborted)
	var conflict *migrate.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, migrate.ConflictError{Kind: "record", Field: field, Stored: "1:l:forged", Incoming: "1:l:s3"}, *conflict)
	st, err2 := co.Status(ctx, st.ID)
	require.NoError(t, err2)
	require.Equal(t, migrate.Aborted, st.State)
	require.Contains(t, st.Reason, "protocol conflict")
	require.Contains(t, st.Reason, "forged")
	require.Zero(t, e.dataKeys("a", u), "the aborted import left nothing on the target")
	require.Equal(t, routing.StateOpen, e.own("b", u).State, "the source still owns the unit")
	require.Equal(t, int64(1), co.Stats().Conflicts)
	m.check(t, e, "b", u)
}

func TestVerificationCatchesSwappedRecordWithEqualCounts(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(10)
	e.openOwner(u)
	m := newModel()
	m.seed(t, e.client(), u, 100)
	tgt := e.clients["a"].(redis.Cmdable)
	k := routingfmt.Keys(e.shards["a"].Keys().Tag(u))
	co := e.coordinator(migrate.Options{OnState: func(s migrate.Status) {
		if s.State == migrate.CatchingUp && s.LogApplied == 0 {
			// Replace one record by another on the target: same count, other content.
			tgt.HDel(context.Background(), k.Records, routingfmt.RecordField("course", "seed-5"))
			tgt.HSet(context.Background(), k.Records, routingfmt.RecordField("course", "intruder"), "1:l:s5")
		}
	}})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "a"})
	require.ErrorIs(t, err, migrate.ErrAborted)
	var ve *migrate.VerifyError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, ve.Source.Records, ve.Target.Records, "counts alone are equal")
	require.NotEqual(t, ve.Source.Sum, ve.Target.Sum)
	st, _ = co.Status(ctx, st.ID)
	require.Equal(t, migrate.Aborted, st.State)
	require.Contains(t, st.Reason, "verification failed")
	require.Contains(t, st.Reason, "intruder")
	require.Equal(t, int64(1), co.Stats().VerifyFailures)
	require.Equal(t, routing.Ownership{Generation: 1, State: routing.StateOpen}, e.own("b", u))
	require.Zero(t, e.dataKeys("a", u))
	require.Equal(t, uint64(1), e.table().Generation)
}

func TestMovesAnOverriddenTenantAndASpreadSubBucket(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	nt := e.table().Next()
	nt.SetOverride("acme", "a")
	nt.Spreads = map[string][]string{"big": {"a", "a", "b"}}
	require.NoError(t, e.store.Publish(ctx, nt))
	co := e.coordinator(migrate.Options{})
	for _, u := range []routing.Unit{routing.TenantUnit("acme"), routing.SpreadUnit("big", 1)} {
		t.Run(u.String(), func(t *testing.T) {
			e.openOwner(u)
			gen := e.table().Generation
			for i := 0; i < 20; i++ {
				_, err := e.shards["a"].Exec(ctx, u, gen, u.Tenant, fmt.Sprintf("%s-%d", u, i), routing.Put(fmt.Sprintf("k%d", i), "v"))
				require.NoError(t, err)
			}
			st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Source: "a", Target: "b"})
			require.NoError(t, err)
			tb := e.table()
			require.Equal(t, "b", tb.Owner(u))
			require.Equal(t, st.FlipGen, tb.Generation)
			require.Len(t, e.records("b", u), 20)
			if u.Kind == routing.KindSpread {
				require.Equal(t, []string{"a", "b", "b"}, tb.Spreads["big"], "only the one sub-bucket moved")
			}
			res, err := e.shards["b"].Exec(ctx, u, tb.Generation, u.Tenant, fmt.Sprintf("%s-%d", u, 3), routing.Put("k3", "v"))
			require.NoError(t, err)
			require.True(t, res.Replayed)
		})
	}
}

func TestOwnershipChangedUnderneathAbortsWithoutTouchingTheSource(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(12)
	require.Equal(t, "b", e.openOwner(u))
	m := newModel()
	m.seed(t, e.client(), u, 200)
	moved := routing.Ownership{Generation: 7, State: routing.StateOpen}
	co := e.coordinator(migrate.Options{BatchSize: 50, OnState: func(s migrate.Status) {
		if s.State == migrate.Copying && s.Copied > 0 && e.own("b", u) != moved {
			// Someone else re-provisions the unit on the source at another generation.
			_, err := e.shards["b"].Transition(context.Background(), u,
				routing.Ownership{Generation: 1, State: routing.StateOpen}, moved)
			require.NoError(t, err)
		}
	}})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "a"})
	require.ErrorIs(t, err, migrate.ErrAborted)
	require.ErrorIs(t, err, migrate.ErrOwnershipChanged)
	st, _ = co.Status(ctx, st.ID)
	require.Equal(t, migrate.Aborted, st.State)
	require.Equal(t, moved, e.own("b", u), "the source's new record is left alone")
	require.Zero(t, e.dataKeys("a", u))
	require.Equal(t, uint64(1), e.table().Generation)
}
