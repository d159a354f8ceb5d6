package migrate_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// hookControl is a control client a test can put hooks on.
type hookControl interface {
	migrate.Control
	AddHook(redis.Hook)
}

// raceEnv is an env plus a way to open more clients to its control Redis, one per
// coordinator (a process of its own, with its own faults).
type raceEnv struct {
	*env
	newControl func() hookControl
}

// raceEnvs returns a standalone env and one whose control Redis and shard "a" are the
// shared 3-master cluster (shard "b" standalone).
func raceEnvs(t *testing.T) map[string]raceEnv {
	srv := celebritytest.Shards(t, 3)
	std := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": srv[2].Client(t)},
		routing.ShardOptions{})
	cl := celebritytest.SharedCluster(t)
	b := celebritytest.Standalone(t)
	clu := newEnvOver(t, cl.Client(t), map[string]migrate.ShardClient{"a": cl.Client(t), "b": b.Client(t)}, routing.ShardOptions{})
	return map[string]raceEnv{
		"standalone": {std, func() hookControl { return srv[0].Client(t) }},
		"cluster":    {clu, func() hookControl { return cl.Client(t) }},
	}
}

// coordinatorOver returns a coordinator of the env over its own control client.
func (e raceEnv) coordinatorOver(t testing.TB, ctl migrate.Control, o migrate.Options) *migrate.Coordinator {
	o.Shards, o.Prefix = e.clients, e.prefix
	c, err := migrate.New(ctl, o)
	require.NoError(t, err)
	return c
}

// scriptName names the migrate script a command runs (EVALSHA or EVAL), "" for others.
func scriptName(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	name := strings.ToLower(fmt.Sprint(args[0]))
	s, _ := args[1].(string)
	if name == "eval" {
		h := sha1.Sum([]byte(s))
		s = hex.EncodeToString(h[:])
	} else if name != "evalsha" {
		return ""
	}
	for n, h := range migrate.ScriptHashes() {
		if h == s {
			return n
		}
	}
	return ""
}

// grants records, for every takeover the control Redis granted (whether or not its reply
// reached the caller), the holder token and the epoch.
type grants struct {
	mu       sync.Mutex
	byHolder map[string]map[string]bool // holder -> epochs
	byEpoch  map[string]map[string]bool // epoch -> holders
}

func newGrants() *grants {
	return &grants{byHolder: map[string]map[string]bool{}, byEpoch: map[string]map[string]bool{}}
}

func (g *grants) add(holder, epoch string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byHolder[holder] == nil {
		g.byHolder[holder] = map[string]bool{}
	}
	if g.byEpoch[epoch] == nil {
		g.byEpoch[epoch] = map[string]bool{}
	}
	g.byHolder[holder][epoch], g.byEpoch[epoch][holder] = true, true
}

// check requires every holder token to have been granted one epoch (a retry after a lost
// reply gets the same one) and every epoch to have gone to one holder; it returns the
// number of distinct epochs granted.
func (g *grants) check(t testing.TB) int {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for h, es := range g.byHolder {
		require.Len(t, es, 1, "holder %s was granted several epochs: %v", h, es)
	}
	for e, hs := range g.byEpoch {
		require.Len(t, hs, 1, "epoch %s was granted to several holders: %v", e, hs)
	}
	return len(g.byEpoch)
}

// lossy runs every command, and loses the reply (after the command ran) of the first
// budget[name] calls of each named migrate script; it records the takeovers granted.
type lossy struct {
	mu     sync.Mutex
	budget map[string]int
	skip   map[string]int // calls of each script whose replies pass before losses start
	lost   atomic.Int64
	g      *grants
}

func (l *lossy) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l *lossy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (l *lossy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := scriptName(cmd)
		err := next(ctx, cmd)
		if err != nil || name == "" {
			return err
		}
		if name == "acquire" && l.g != nil {
			if c, ok := cmd.(*redis.Cmd); ok {
				if v, _ := c.StringSlice(); len(v) == 2 && v[0] == "ok" {
					l.g.add(fmt.Sprint(cmd.Args()[5]), v[1])
				}
			}
		}
		l.mu.Lock()
		if l.skip[name] > 0 {
			l.skip[name]--
			l.mu.Unlock()
			return nil
		}
		lose := l.budget[name] > 0
		if lose {
			l.budget[name]--
		}
		l.mu.Unlock()
		if lose {
			l.lost.Add(1)
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return nil
	}
}

// resumeUntilDone resumes migration id until a Resume ends it, taking a lost reply or a
// takeover by another driver as a reason to resume again.
func resumeUntilDone(ctx context.Context, co *migrate.Coordinator, id string) (migrate.Status, error) {
	for {
		st, err := co.Resume(ctx, id)
		if err == nil || !(errors.Is(err, errLostReply) || errors.Is(err, migrate.ErrFenced)) || ctx.Err() != nil {
			return st, err
		}
	}
}

// Two coordinators (separate clients, standing for two processes) resume one migration at
// the same moment while the replies of their first takeovers and journal steps are lost,
// with writers on the unit. Every holder token gets one epoch however often its takeover
// is retried, no epoch goes to two holders, the epoch counter holds exactly the epochs
// granted, at most one shard is open at every instant, and the target ends with every
// acknowledged write.
func TestConcurrentResumesWithLostTakeoverReplies(t *testing.T) {
	for name, e := range raceEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			u := routing.BucketUnit(3)
			src := e.openOwner(u)
			dst := other(src)
			m := newModel()
			// Paced writers: the catch-up (batches of 20) must outrun them on a loaded
			// machine too (see TestDriverStoppedAfterTakeoverWokenAfterAMoveBack).
			m.pace = 5 * time.Millisecond
			m.seed(t, e.client(), u, 150)

			g := newGrants()
			cos := make([]*migrate.Coordinator, 2)
			hooks := make([]*lossy, 2)
			for i := range cos {
				ctl := e.newControl()
				hooks[i] = &lossy{g: g, budget: map[string]int{"acquire": 2, "step": 1}}
				ctl.AddHook(hooks[i])
				cos[i] = e.coordinatorOver(t, ctl, migrate.Options{BatchSize: 20, LeaseTTL: 400 * time.Millisecond})
			}
			st, err := e.coordinator(migrate.Options{}).Start(ctx, migrate.Spec{Unit: u, Target: dst})
			require.NoError(t, err)

			obs := e.observe(u, src, dst)
			stop := make(chan struct{})
			var seq atomic.Int64
			wdone := make(chan error, 2)
			for i := 0; i < 2; i++ {
				go func() { wdone <- m.writer(ctx, e.client(), u, fmt.Sprintf("w%d", i), 8, stop, &seq) }()
			}
			var wg sync.WaitGroup
			res := make([]migrate.Status, 2)
			errs := make([]error, 2)
			for i, co := range cos {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res[i], errs[i] = resumeUntilDone(ctx, co, st.ID)
				}()
			}
			wg.Wait()
			close(stop)
			for i := 0; i < 2; i++ {
				require.NoError(t, <-wdone)
			}
			obs.finish(t)
			for i := range cos {
				require.NoError(t, errs[i], "resume %d", i)
				require.Equal(t, migrate.OwnedB, res[i].State)
			}
			require.Positive(t, hooks[0].lost.Load()+hooks[1].lost.Load())

			n := g.check(t)
			require.Positive(t, n)
			final, err := e.coordinator(migrate.Options{}).Status(ctx, st.ID)
			require.NoError(t, err)
			cnt, err := e.control.(redis.Cmdable).Get(ctx, e.prefixEpochKey(u)).Int()
			require.NoError(t, err)
			require.Equal(t, n, cnt, "the epoch counter holds exactly the epochs granted")
			require.Equal(t, uint64(cnt), final.Epoch, "the last driver holds the newest epoch")
			require.Equal(t, dst, e.table().Owner(u))
			m.check(t, e.env, dst, u)
		})
	}
}

// prefixEpochKey is the control key of unit u's epoch counter (see the key layout in the
// package documentation).
func (e *env) prefixEpochKey(u routing.Unit) string {
	return routing.Keys{Prefix: e.prefix}.ControlTag() + ":migrate:epoch:" + routing.Keys{Prefix: e.prefix}.Tag(u)
}

// A carve-out whose driver loses the replies of its first takeover and of journal steps
// (the flip's among them) while an operator's Cancel races it from another process, with
// the carved tenant and two neighbours writing through clients on old tables. Whatever wins
// (the carve-out refuses the Cancel from ClosedA on), at every instant at most one shard is
// writable for the tenant, the neighbours never meet a stale route, and the tenant's owner
// at the end holds every acknowledged write of it, as the bucket does for the neighbours.
func TestCarveOutWithLostRepliesAndARacingCancel(t *testing.T) {
	for name, e := range raceEnvs(t) {
		for _, at := range []migrate.State{migrate.Copying, migrate.CatchingUp, migrate.ClosedA} {
			t.Run(fmt.Sprintf("%s/cancelAt=%s", name, at), func(t *testing.T) {
				ctx := testkit.Ctx(t)
				fat := fmt.Sprintf("rv-%s-%s", name, at)
				others := sameBucket(fat, fat+"-n", 2)
				bu := routing.BucketUnit(routing.BucketOf(fat, testBuckets))
				tu := routing.TenantUnit(fat)
				src := e.openOwner(bu)
				dst := other(src)
				m := newTModel()
				// Paced writers: the catch-up (batches of 20, replies lost) must outrun them
				// on a loaded machine too.
				m.pace = 5 * time.Millisecond
				seeder := e.client()
				m.seed(t, seeder, fat, 150)
				for _, o := range others {
					m.seed(t, seeder, o, 20)
				}

				obs := e.tenantObserver(fat, src, dst)
				stop := make(chan struct{})
				var fatStale, otherStale atomic.Int64
				wdone := make(chan error, 3)
				go func() { wdone <- m.writer(ctx, e.client(), fat, "f", 8, stop, &fatStale) }()
				for i, o := range others {
					go func() { wdone <- m.writer(ctx, e.client(), o, fmt.Sprintf("o%d", i), 5, stop, &otherStale) }()
				}

				reached := make(chan string, 1)
				var once sync.Once
				ctl := e.newControl()
				ctl.AddHook(&lossy{budget: map[string]int{"acquire": 1, "step": 4}, skip: map[string]int{"step": 1}})
				co := e.coordinatorOver(t, ctl, migrate.Options{BatchSize: 20, LeaseTTL: 500 * time.Millisecond,
					OnState: func(s migrate.Status) {
						if s.State == at {
							once.Do(func() { reached <- s.ID })
						}
					}})
				cancelled := make(chan error, 1)
				carved := make(chan struct{})
				var tried atomic.Bool
				go func() {
					select {
					case id := <-reached:
						tried.Store(true)
						_, err := e.coordinator(migrate.Options{}).Cancel(ctx, id)
						cancelled <- err
					case <-carved:
						// The state's step reply was lost: the Cancel did not run.
						cancelled <- nil
					}
				}()
				st, err := co.StartCarve(ctx, migrate.CarveSpec{Tenant: fat, Target: dst})
				require.NoError(t, err)
				final, err := resumeUntilDone(ctx, co, st.ID)
				close(carved)
				cerr := <-cancelled
				t.Logf("carve-out ended in %s (%v); cancel tried %v: %v; stats %+v", final.State, err, tried.Load(), cerr, co.Stats())
				close(stop)
				for i := 0; i < 3; i++ {
					require.NoError(t, <-wdone)
				}
				obs.finish(t)
				require.Zero(t, otherStale.Load(), "the neighbours never met a stale route")

				switch final.State {
				case migrate.OwnedB:
					require.NoError(t, err)
					if cerr != nil {
						require.ErrorIs(t, cerr, migrate.ErrCancelRefused)
					}
					require.Equal(t, dst, e.table().Overrides[fat])
					require.Equal(t, routing.StateOpen, e.own(dst, tu).State)
					m.check(t, e.env, dst, tu, fat)
				case migrate.Cancelled:
					require.ErrorIs(t, err, migrate.ErrCancelled)
					require.NoError(t, cerr)
					require.Empty(t, e.table().Overrides[fat])
					require.NotEqual(t, routing.StateOpen, e.own(dst, tu).State)
					require.Zero(t, e.dataKeys(dst, tu), "the target holds nothing")
					m.check(t, e.env, src, bu, fat)
				default:
					t.Fatalf("carve-out ended in %s: %v (cancel: %v)", final.State, err, cerr)
				}
				if at == migrate.ClosedA && tried.Load() {
					require.Equal(t, migrate.OwnedB, final.State, "a carve-out is not cancelled from ClosedA on")
				}
				for _, o := range others {
					m.check(t, e.env, src, bu, o)
				}
				unfinished, err := co.Unfinished(ctx)
				require.NoError(t, err)
				require.Empty(t, unfinished)
			})
		}
	}
}
