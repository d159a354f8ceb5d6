package migrate_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// killPoints are the instants at which the driving process dies: right after the journal
// write that matches. (Dying between opening the target and publishing the table is covered
// by the lost-reply test, which loses exactly those replies.)
var killPoints = []struct {
	name string
	at   func(migrate.Status) bool
}{
	{"Copying/start", func(s migrate.Status) bool { return s.State == migrate.Copying && s.Cursor == "rec:0" }},
	{"Copying/mid", func(s migrate.Status) bool { return s.State == migrate.Copying && s.Copied > 0 }},
	{"CatchingUp", func(s migrate.Status) bool { return s.State == migrate.CatchingUp }},
	{"ClosedA/before-barrier", func(s migrate.Status) bool { return s.State == migrate.ClosedA && s.Barrier == "" }},
	{"ClosedA/after-barrier", func(s migrate.Status) bool { return s.State == migrate.ClosedA && s.Barrier != "" }},
	{"ReadyB", func(s migrate.Status) bool { return s.State == migrate.ReadyB }},
}

func TestCoordinatorKilledAtEachStateThenResumedOrCancelled(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	bucket := uint32(0)
	for _, kp := range append([]struct {
		name string
		at   func(migrate.Status) bool
	}{{"OwnedA", nil}}, killPoints...) {
		for _, then := range []string{"resume", "cancel"} {
			t.Run(kp.name+"/"+then, func(t *testing.T) {
				ctx := testkit.Ctx(t)
				u := routing.BucketUnit(bucket % testBuckets)
				bucket++
				tb := e.table()
				src := tb.Owner(u)
				dst := "b"
				if src == "b" {
					dst = "a"
				}
				if e.own(src, u).State == routing.StateNone {
					e.openOwner(u)
				}
				cl := e.client()
				m := newModel()
				m.seed(t, cl, u, 400)
				obs := e.observe(u, src, dst)
				stop := writeLoad(ctx, m, cl, u, 2)

				dctx, kill := context.WithCancel(ctx)
				var killedAt migrate.Status
				co := e.coordinator(migrate.Options{BatchSize: 100, OnState: func(s migrate.Status) {
					if kp.at != nil && killedAt.ID == "" && kp.at(s) {
						killedAt = s
						kill()
					}
				}})
				st, err := co.Start(ctx, migrate.Spec{Unit: u, Target: dst})
				require.NoError(t, err)
				if kp.at != nil {
					_, err = co.Resume(dctx, st.ID)
					require.ErrorIs(t, err, context.Canceled)
					require.NotEmpty(t, killedAt.ID, "the kill point was reached")
				}
				kill()

				// A new process picks the migration up from the journal.
				co2 := e.coordinator(migrate.Options{BatchSize: 100})
				open, err := co2.Unfinished(ctx)
				require.NoError(t, err)
				require.Len(t, open, 1)
				require.Equal(t, st.ID, open[0].ID)
				t.Log(open[0].String())
				cancellable := kp.at == nil || killedAt.State.Cancellable()
				switch {
				case then == "cancel" && cancellable:
					st, err = co2.Cancel(ctx, st.ID)
					require.NoError(t, err)
					require.Equal(t, migrate.Cancelled, st.State)
					require.NoError(t, stop())
					obs.finish(t)
					require.Equal(t, src, e.table().Owner(u))
					require.Equal(t, routing.StateOpen, e.own(src, u).State)
					require.NotEqual(t, routing.StateOpen, e.own(dst, u).State)
					require.Zero(t, e.dataKeys(dst, u), "a cancelled migration leaves no data on the target")
					m.check(t, e, src, u)
				case then == "cancel":
					_, err = co2.Cancel(ctx, st.ID)
					require.ErrorIs(t, err, migrate.ErrCancelRefused)
					fallthrough
				default:
					st, err = co2.Resume(ctx, st.ID)
					require.NoError(t, err)
					require.Equal(t, migrate.OwnedB, st.State)
					require.Eventually(t, func() bool { return cl.table().Generation >= st.FlipGen }, 30e9, 1e6)
					require.NoError(t, stop())
					obs.finish(t)
					require.Equal(t, dst, e.table().Owner(u))
					require.Equal(t, routing.StateClosed, e.own(src, u).State)
					require.Equal(t, routing.StateOpen, e.own(dst, u).State)
					m.check(t, e, dst, u)
				}
				// The unit's lock is free again: a new migration can start (and is cancelled).
				next, err := co2.Start(ctx, migrate.Spec{Unit: u, Target: src})
				if st.State == migrate.Cancelled {
					require.ErrorIs(t, err, migrate.ErrInvalid, "the unit is still on the source")
					return
				}
				require.NoError(t, err)
				_, err = co2.Cancel(ctx, next.ID)
				require.NoError(t, err)
			})
		}
	}
}
