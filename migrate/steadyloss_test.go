package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// maxResumesUnderLoss bounds the Resumes a move may need while the coordinator loses a
// control reply every ~45 ms.
const maxResumesUnderLoss = 40

// lossGap is the fewest control commands the coordinator sends between two lost replies.
const lossGap = 12

// commandCount counts the commands a client sends.
type commandCount struct{ n atomic.Int64 }

func (c *commandCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (c *commandCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

// With one lost coordinator reply every ~45 ms (control Redis, no go-redis retries), a move
// under writes finishes within a bounded number of Resumes: a takeover whose reply was lost
// is recognised by its retry, a stopped drive leaves the lease free, and the verification
// continues where it stopped.
func TestMoveFinishesUnderSteadyLostControlReplies(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		srv := celebritytest.Shards(t, 3)
		e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{
			"a": srv[1].Client(t), "b": srv[2].Client(t),
		}, routing.ShardOptions{})
		moveUnderSteadyLoss(t, e, srv[0], routing.BucketUnit(6), "b")
	})
	t.Run("cluster", func(t *testing.T) {
		srv := celebritytest.Shards(t, 2)
		e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{
			"a": srv[1].Client(t), "k": celebritytest.SharedCluster(t).Client(t),
		}, routing.ShardOptions{})
		moveUnderSteadyLoss(t, e, srv[0], routing.BucketUnit(6), "k")
	})
}

func moveUnderSteadyLoss(t *testing.T, e *env, control *celebritytest.Server, u routing.Unit, dst string) {
	ctx := testkit.Ctx(t)
	require.NotEqual(t, dst, e.openOwner(u))
	cl := e.client()
	m := newModel()
	m.seed(t, cl, u, 1500)
	stop := pacedWrites(ctx, m, cl, u, 4*time.Millisecond)

	st, err := e.coordinator(migrate.Options{}).Start(ctx, migrate.Spec{Unit: u, Target: dst})
	require.NoError(t, err)

	inj := faults.New()
	lossy := control.Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil); o.MaxRetries = -1 })
	cmds := &commandCount{}
	lossy.AddHook(cmds)
	co, err := migrate.New(lossy, migrate.Options{Prefix: e.prefix, BatchSize: 100, Shards: e.clients,
		LeaseTTL: 2 * time.Second})
	require.NoError(t, err)

	// Arm one drop every ~45 ms, once the previous one was consumed and the coordinator sent
	// at least lossGap control commands since the last was armed: on a loaded machine, where
	// a step takes longer than 45 ms, a drop every 45 ms would take the reply of nearly every
	// command, and the Resumes a move needs would count the machine's speed.
	lctx, lstop := context.WithCancel(ctx)
	lossDone := make(chan struct{})
	go func() {
		defer close(lossDone)
		armed, armedAt := int64(0), int64(0)
		tick := time.NewTicker(45 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			if n := cmds.n.Load(); inj.Dropped() >= armed && (armed == 0 || n-armedAt >= lossGap) {
				inj.DropReply(faults.Match{}, 1)
				armed, armedAt = armed+1, n
			}
		}
	}()

	id, watch := st.ID, e.coordinator(migrate.Options{})
	resumes := 0
	for st.State != migrate.OwnedB {
		resumes++
		require.LessOrEqual(t, resumes, maxResumesUnderLoss,
			"still %s after %d resumes (%d replies lost)", st.State, resumes-1, inj.Dropped())
		var err error
		_, rerr := co.Resume(ctx, id)
		if rerr != nil {
			require.True(t, errors.Is(rerr, faults.ErrReplyDropped) || errors.Is(rerr, migrate.ErrDriverBusy),
				"resume %d: %v", resumes, rerr)
		}
		st, err = watch.Status(ctx, id)
		require.NoError(t, err)
	}
	lstop()
	<-lossDone
	t.Logf("%d resumes, %d replies lost, %d control commands", resumes, inj.Dropped(), cmds.n.Load())
	require.Positive(t, inj.Dropped())
	require.NoError(t, stop())
	require.Equal(t, dst, e.table().Owner(u))
	m.check(t, e, dst, u)
}

// pacedWrites writes puts and deletes to 50 keys of u, one every interval, recording every
// acknowledged result, until the returned stop is called.
func pacedWrites(ctx context.Context, m *model, c *client, u routing.Unit, interval time.Duration) (stop func() error) {
	ch, done := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ch:
				done <- nil
				return
			case <-tick.C:
			}
			key := fmt.Sprintf("paced-k%d", i%50)
			opID := fmt.Sprintf("m%d-paced-op%d", m.id, i)
			op := routing.Put(key, fmt.Sprintf("v%d", i))
			if i%7 == 3 {
				op = routing.Delete(key)
			}
			res, err := c.do(ctx, u, "course", opID, op)
			if err != nil {
				done <- fmt.Errorf("paced writer op %s: %w", opID, err)
				return
			}
			m.ack(key, op, opID, res)
		}
	}()
	return func() error { close(ch); return <-done }
}

// A takeover whose reply is lost is retried with the same operation (holder token): the
// retry finds the takeover done and gets the same epoch, so the Resume goes on instead of
// failing and leaving the lease to a token nobody holds. The same holds for go-redis's own
// retry of the script.
func TestLostTakeoverReplyIsRecognisedByItsRetry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
	}{{"caller retry", -1}, {"go-redis retry", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := celebritytest.Shards(t, 3)
			e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{
				"a": srv[1].Client(t), "b": srv[2].Client(t),
			}, routing.ShardOptions{})
			ctx := testkit.Ctx(t)
			u := routing.BucketUnit(4)
			require.Equal(t, "a", e.openOwner(u))
			m := newModel()
			m.seed(t, e.client(), u, 50)
			inj := faults.New()
			lossy := srv[0].Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil); o.MaxRetries = tc.retries })
			co, err := migrate.New(lossy, migrate.Options{Prefix: e.prefix, Shards: e.clients})
			require.NoError(t, err)
			// Warm the script cache so the drop matches EVALSHA.
			warm := routing.BucketUnit(14)
			e.openOwner(warm)
			_, err = co.Migrate(ctx, migrate.Spec{Unit: warm, Target: "a"})
			require.NoError(t, err)
			st, err := co.Start(ctx, migrate.Spec{Unit: u, Target: "b"})
			require.NoError(t, err)
			inj.DropReply(faults.Match{Command: "EVALSHA", Arg: migrate.ScriptHashes()["acquire"]}, 1)
			st, err = co.Resume(ctx, st.ID)
			require.NoError(t, err)
			require.Equal(t, int64(1), inj.Dropped())
			require.Equal(t, migrate.OwnedB, st.State)
			require.Equal(t, uint64(1), st.Epoch, "the retry got the epoch of the takeover that ran")
			require.Equal(t, int64(2), co.Stats().Takeovers, "one takeover per migration")
			m.check(t, e, "b", u)
		})
	}
}
