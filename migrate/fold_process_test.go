package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// Fold-backs driven by real driver processes, standalone and cluster shards, while every
// tenant of the bucket keeps writing through clients on old tables: a driver SIGKILLed at
// several states (and right before its claim and its barrier script) is resumed by a new
// process; a driver stopped (SIGSTOP) in catch-up or just before publishing is taken over,
// and once continued it is fenced and publishes nothing; a Cancel races a stopped driver
// and a running one. After every round the tenant has one open owner, the one the table
// names; at the end every tenant's part of the bucket equals its acknowledged history and
// the neighbour that stayed never met a stale route.
func TestFoldBackDriverProcessesKilledOrStoppedAtEveryState(t *testing.T) {
	celebritytest.Long(t)
	for name, pe := range newProcEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			type round struct {
				how, at, arg string
				n            int // the round's place in the full list
			}
			k := 0 // the deployment's share of the rounds in quick mode
			if name == "cluster" {
				k = 1
			}
			var rounds []round
			for i, rd := range []round{
				{how: "killed", arg: "claim"},
				{how: "killed", at: string(migrate.Copying)},
				{how: "killed", at: string(migrate.ClosedA)},
				{how: "killed", arg: "closed"},
				{how: "killed", at: string(migrate.ReadyB)},
				{how: "stopped", at: string(migrate.CatchingUp)},
				{how: "stopped", arg: routing.Keys{Prefix: pe.prefix}.Table()},
				{how: "cancelled", at: string(migrate.CatchingUp)},
				{how: "raced"},
			} {
				// Quick mode runs each round on one of the two deployments, alternating.
				if celebritytest.Spread(i, k, 2) {
					rd.n = i
					rounds = append(rounds, rd)
				}
			}
			t.Logf("rounds %v (%s=1 runs all nine on both deployments)", rounds, celebritytest.FullEnv)
			neighbour := "pfold-stay-" + name
			tenants := sameBucket(neighbour, "pfold-fat-"+name+"-", len(rounds))
			bu := routing.BucketUnit(routing.BucketOf(neighbour, testBuckets))
			a := pe.openOwner(bu)
			b := other(a)
			m := newTModel()
			m.pace = 2 * time.Millisecond
			seeder := pe.client()
			for _, tn := range append([]string{neighbour}, tenants...) {
				m.seed(t, seeder, tn, 60)
			}
			co := pe.coordinator(migrate.Options{LeaseTTL: procLease})
			cleaner := pe.coordinator(migrate.Options{Grace: time.Nanosecond})
			for i, tn := range tenants {
				id := fmt.Sprintf("%s-c%d", name, i)
				_, err := co.Carve(ctx, migrate.CarveSpec{ID: id, Tenant: tn, Target: b})
				require.NoError(t, err)
				_, err = cleaner.Cleanup(ctx, id)
				require.NoError(t, err)
			}
			stop := make(chan struct{})
			var foldedStale, stayStale atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, len(tenants)+1)
			for i, tn := range append([]string{neighbour}, tenants...) {
				c, counter := pe.client(), &foldedStale
				if i == 0 {
					counter = &stayStale
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- m.writer(ctx, c, tn, fmt.Sprintf("w%d", i), 15, stop, counter)
				}()
			}
			requireOne := func(i int, tn string, folded bool) {
				t.Helper()
				tu := routing.TenantUnit(tn)
				_, moved, err := pe.shards[a].Ownership(ctx, bu)
				require.NoError(t, err)
				require.Equal(t, routing.Ownership{Generation: 1, State: routing.StateOpen}, pe.own(a, bu))
				if folded {
					require.NotContains(t, pe.table().Overrides, tn, "round %d", i)
					require.NotContains(t, moved, tn, "round %d: the bucket serves the tenant", i)
					require.Equal(t, routing.StateClosed, pe.own(b, tu).State, "round %d", i)
				} else {
					require.Equal(t, b, pe.table().Overrides[tn], "round %d", i)
					require.Contains(t, moved, tn, "round %d: the bucket refuses the tenant", i)
					require.Equal(t, routing.StateOpen, pe.own(b, tu).State, "round %d", i)
					require.Empty(t, tenantFields(pe.records(a, bu), tn), "round %d: nothing of the tenant in the bucket", i)
				}
				unfinished, err := co.Unfinished(ctx)
				require.NoError(t, err)
				require.Empty(t, unfinished)
			}
			for i, rd := range rounds {
				tn := tenants[i]
				id := fmt.Sprintf("%s-fold-%d", name, i)
				common := []string{"-id", id, "-fold", tn}
				args := common
				switch {
				case rd.at != "":
					args = append(args, "-stop-at-state", rd.at)
				case rd.arg != "":
					args = append(args, "-stop-before-arg", rd.arg)
				}
				p1 := pe.start(t, args...)
				switch rd.how {
				case "raced":
					// A Cancel races a running driver: it wins before the barrier, or is
					// refused after it and the driver finishes.
					time.Sleep(time.Duration(rd.n*rd.n) * time.Millisecond)
					var err error
					require.Eventually(t, func() bool {
						_, err = co.Cancel(ctx, id)
						return !errors.Is(err, migrate.ErrNotFound)
					}, 30*time.Second, time.Millisecond)
					r1 := p1.result()
					// The Cancel may itself be taken over by the driver once its lease ran
					// out (the driver then finishes the cancellation): the journal says
					// how it ended.
					st, lerr := co.Status(ctx, id)
					require.NoError(t, lerr)
					if errors.Is(err, migrate.ErrFenced) {
						err = nil
						if st.State == migrate.OwnedB {
							err = migrate.ErrCancelRefused
						}
					}
					if err == nil {
						require.Equal(t, migrate.Cancelled, st.State)
						require.True(t, r1.Cancelled || r1.Fenced, "round %d: %+v", i, r1)
						requireOne(i, tn, false)
						r2 := pe.start(t, "-id", id+"-again", "-fold", tn).result()
						require.Equal(t, "OwnedB", r2.State, "round %d: %s", i, r2.Err)
					} else {
						require.ErrorIs(t, err, migrate.ErrCancelRefused)
						require.Equal(t, "OwnedB", r1.State, "round %d: %s", i, r1.Err)
					}
					requireOne(i, tn, true)
					continue
				case "cancelled":
					p1.waitStopped()
					st, err := co.Cancel(ctx, id)
					require.NoError(t, err)
					require.Equal(t, migrate.Cancelled, st.State)
					requireOne(i, tn, false)
					p1.cont()
					r1 := p1.result()
					require.True(t, r1.Fenced || r1.Cancelled, "round %d: the stopped driver is fenced: %+v", i, r1)
					requireOne(i, tn, false)
					r2 := pe.start(t, "-id", id+"-again", "-fold", tn).result()
					require.Equal(t, "OwnedB", r2.State, "round %d: %s", i, r2.Err)
					requireOne(i, tn, true)
					continue
				}
				p1.waitStopped()
				if rd.how == "killed" {
					p1.signal(syscall.SIGKILL)
					p1.killed()
				}
				r2 := pe.start(t, append([]string{"-op", "resume"}, common...)...).result()
				require.Equal(t, "OwnedB", r2.State, "round %d: %s", i, r2.Err)
				gen := pe.table().Generation
				if rd.how == "stopped" {
					p1.cont()
					r1 := p1.result()
					require.True(t, r1.Fenced, "round %d: the first driver is fenced: %+v", i, r1)
					require.Equal(t, gen, pe.table().Generation, "the fenced driver published nothing")
				}
				requireOne(i, tn, true)
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Zero(t, stayStale.Load(), "the neighbour that stayed never met a stale route")
			require.Positive(t, foldedStale.Load())
			for _, tn := range append([]string{neighbour}, tenants...) {
				m.check(t, pe.env, a, bu, tn)
			}
		})
	}
}
