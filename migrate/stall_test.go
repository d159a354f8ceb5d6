package migrate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// pauser stands for a driver process stopped at a chosen point: once armed (by the reply
// of a takeover that passed, or before the retry of one whose reply was lost), every
// further command of its client waits for release, and its lease renewals fail, as for a
// SIGSTOPped process whose heartbeat no longer runs.
type pauser struct {
	loseFirstAcquire bool // lose the reply of the first takeover and stop before its retry
	mu               sync.Mutex
	acquires         int
	paused           bool
	epoch            string
	reached          chan struct{}
	release          chan struct{}
}

func newPauser(loseFirst bool) *pauser {
	return &pauser{loseFirstAcquire: loseFirst, reached: make(chan struct{}), release: make(chan struct{})}
}

func (p *pauser) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *pauser) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (p *pauser) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := strings.ToLower(cmd.Name()); n == "hello" || n == "client" || n == "auth" {
			return next(ctx, cmd)
		}
		name := scriptName(cmd)
		p.mu.Lock()
		paused := p.paused
		p.mu.Unlock()
		if paused {
			if name == "renew" {
				select {
				case <-p.release:
				default:
					cmd.SetErr(errLostReply)
					return errLostReply
				}
			}
			<-p.release
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		if name != "acquire" || err != nil {
			return err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.acquires++
		if v, _ := cmd.(*redis.Cmd).StringSlice(); len(v) == 2 && v[0] == "ok" {
			p.epoch = v[1]
		}
		p.paused = true
		close(p.reached)
		if p.loseFirstAcquire && p.acquires == 1 {
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return nil
	}
}

// A driver stopped right after its takeover (its reply received, or lost and its retry
// not yet sent) is taken over once its lease expires; the other driver finishes, and the
// unit is moved back by a second migration. Continued, the old driver changes nothing: it
// is fenced (or finds its migration finished), the unit stays open on its original shard
// only, the table keeps it there, and every acknowledged write of the writers that ran
// throughout is there.
func TestDriverStoppedAfterTakeoverWokenAfterAMoveBack(t *testing.T) {
	for name, e := range raceEnvs(t) {
		for _, lose := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lostTakeoverReply=%v", name, lose), func(t *testing.T) {
				ctx := testkit.Ctx(t)
				u := routing.BucketUnit(6)
				if lose {
					u = routing.BucketUnit(7)
				}
				src := e.openOwner(u)
				dst := other(src)
				m := newModel()
				// A paced writer: the catch-ups (batches of 20) must outrun it on a loaded
				// machine too. Flat out it writes about as fast as they apply, the lag
				// shrinks by a little most rounds and the source stays open for hundreds of
				// rounds (a move back of 0.3 s took 8 to 50 s under load).
				m.pace = 5 * time.Millisecond
				m.seed(t, e.client(), u, 100)
				stop := make(chan struct{})
				var seq atomic.Int64
				wdone := make(chan error, 1)
				go func() { wdone <- m.writer(ctx, e.client(), u, "w", 8, stop, &seq) }()
				obs := e.observe(u, src, dst)

				st, err := e.coordinator(migrate.Options{}).Start(ctx, migrate.Spec{Unit: u, Target: dst})
				require.NoError(t, err)
				p := newPauser(lose)
				ctl := e.newControl()
				ctl.AddHook(p)
				zombie := e.coordinatorOver(t, ctl, migrate.Options{BatchSize: 20, LeaseTTL: 300 * time.Millisecond})
				type result struct {
					st  migrate.Status
					err error
				}
				zdone := make(chan result, 1)
				go func() {
					s, err := zombie.Resume(ctx, st.ID)
					zdone <- result{s, err}
				}()
				<-p.reached
				zepoch := p.epoch
				require.NotEmpty(t, zepoch)

				t.Logf(time.Now().Format("15:04:05.000 ")+"zombie stopped at epoch %s", zepoch)
				st2, err := e.coordinator(migrate.Options{BatchSize: 20, LeaseTTL: 300 * time.Millisecond}).Resume(ctx, st.ID)
				t.Logf(time.Now().Format("15:04:05.000 ")+"taken over and finished: %v", err)
				require.NoError(t, err)
				require.Equal(t, migrate.OwnedB, st2.State)
				require.NotEqual(t, zepoch, fmt.Sprint(st2.Epoch))
				back, err := e.coordinator(migrate.Options{BatchSize: 20}).Migrate(ctx, migrate.Spec{Unit: u, Target: src})
				require.NoError(t, err)
				require.Equal(t, migrate.OwnedB, back.State)
				gen := e.table().Generation
				t.Logf("%s moved back", time.Now().Format("15:04:05.000"))

				close(p.release)
				z := <-zdone
				t.Logf(time.Now().Format("15:04:05.000 ")+"zombie returned %v", z.err)
				// A driver that knew its takeover is fenced at its next step; one whose
				// takeover reply was lost only finds the migration finished by the driver
				// that took over and reports that record.
				if !lose || z.err != nil {
					require.ErrorIs(t, z.err, migrate.ErrFenced)
				}
				require.Equal(t, migrate.OwnedB, z.st.State)
				require.Equal(t, st2.Epoch, z.st.Epoch, "the record is the other driver's")
				p.mu.Lock()
				require.LessOrEqual(t, p.acquires, 2)
				p.mu.Unlock()
				close(stop)
				require.NoError(t, <-wdone)
				obs.finish(t)

				require.Equal(t, gen, e.table().Generation, "the old driver published nothing")
				require.Equal(t, src, e.table().Owner(u))
				require.Equal(t, routing.StateOpen, e.own(src, u).State)
				require.NotEqual(t, routing.StateOpen, e.own(dst, u).State)
				m.check(t, e.env, src, u)
				// The unit still moves.
				t.Logf("%s again", time.Now().Format("15:04:05.000"))
				again, err := e.coordinator(migrate.Options{}).Migrate(ctx, migrate.Spec{Unit: u, Target: dst})
				require.NoError(t, err)
				require.Equal(t, migrate.OwnedB, again.State)
				m.check(t, e.env, dst, u)
			})
		}
	}
}
