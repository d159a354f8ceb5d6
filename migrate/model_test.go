package migrate_test

import (
	"context"
	"errors"
	"flag"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// errLostReply is what a command whose reply was lost returns: a network error, as from a
// broken connection, so the coordinator's retries of idempotent commands run too.
var errLostReply error = lostReplyError{}

type lostReplyError struct{}

// errRoundOver is what a command held at a gate returns once its round ended.
var errRoundOver = errors.New("model: round over")

func (lostReplyError) Error() string   { return "model: reply lost" }
func (lostReplyError) Timeout() bool   { return false }
func (lostReplyError) Temporary() bool { return true }

// gate holds every command of one actor until the model lets it run, one at a time. The
// actor's lease renewals (its heartbeat) pass freely while the actor runs and fail while
// it is paused, as for a stopped process.
type gate struct {
	renew   string
	waiting chan struct{}
	proceed chan bool // true: run the command and lose its reply
	quit    chan struct{}
	mu      sync.Mutex
	paused  bool
}

func newGate() *gate {
	return &gate{renew: migrate.ScriptHashes()["renew"], waiting: make(chan struct{}), proceed: make(chan bool),
		quit: make(chan struct{})}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// A new connection's handshake (HELLO, CLIENT SETINFO) passes through the hooks in
		// go-redis v9.22 while the command that dialled waits for it: it is not a step.
		if name := strings.ToLower(cmd.Name()); name == "hello" || name == "client" || name == "auth" {
			return next(ctx, cmd)
		}
		if args := cmd.Args(); len(args) > 1 && (args[1] == g.renew || args[1] == migrate.RenewSource) {
			g.mu.Lock()
			paused := g.paused
			g.mu.Unlock()
			if paused {
				cmd.SetErr(errLostReply)
				return errLostReply
			}
			return next(ctx, cmd)
		}
		select {
		case g.waiting <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-g.quit:
			return errRoundOver
		}
		// The model answers every command that reached the gate (even one whose ctx ended
		// meanwhile, so the two never disagree on where the actor is); quit frees the
		// actors of a round that failed.
		var lose bool
		select {
		case lose = <-g.proceed:
		case <-g.quit:
			return errRoundOver
		}
		err := next(ctx, cmd)
		if lose && err == nil {
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return err
	}
}

// actor is one driver (Resume) or a Cancel, on a Coordinator of its own whose every
// command passes its gate.
type actor struct {
	name    string
	g       *gate
	co      *migrate.Coordinator
	running bool
	atGate  bool
	done    chan error
}

func (a *actor) start(ctx context.Context, id string) {
	a.running, a.atGate, a.done = true, false, make(chan error, 1)
	go func() {
		var err error
		if a.name == "cancel" {
			_, err = a.co.Cancel(ctx, id)
		} else {
			_, err = a.co.Resume(ctx, id)
		}
		a.done <- err
	}()
}

// settle waits until the actor is at its gate or finished.
func (a *actor) settle(t *rapid.T) {
	select {
	case <-a.g.waiting:
		a.atGate = true
	case err := <-a.done:
		a.running, a.atGate = false, false
		if err != nil && !errors.Is(err, migrate.ErrFenced) && !errors.Is(err, errLostReply) &&
			!errors.Is(err, migrate.ErrCancelled) && !errors.Is(err, migrate.ErrCancelRefused) &&
			!errors.Is(err, migrate.ErrAborted) && !errors.Is(err, context.Canceled) {
			t.Fatalf("%s ended with an unexpected error: %v", a.name, err)
		}
	case <-time.After(30 * time.Second):
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s neither reached its next step nor ended; goroutines:\n%s", a.name, buf)
	}
}

// Two drivers, a Cancel and lease expiries interleave command by command, with lost replies;
// after every command: never two open owners, the journal agrees with the shards; at the end,
// once a last driver finished, exactly one open owner and no claim left.
func TestModelTwoDriversCancelAndResumeWithLostReplies(t *testing.T) {
	celebritytest.Long(t)
	if f := flag.Lookup("rapid.checks"); f != nil {
		explicit := false
		flag.Visit(func(v *flag.Flag) { explicit = explicit || v.Name == "rapid.checks" })
		if !explicit {
			old := f.Value.String()
			// Ten interleavings a deployment in a full run, five in quick mode.
			require.NoError(t, f.Value.Set(strconv.Itoa(celebritytest.Rounds(10, 5))))
			defer func() { _ = f.Value.Set(old) }()
		}
	}
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		srv := celebritytest.Shards(t, 2)
		e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": c, "b": srv[1].Client(t)}, routing.ShardOptions{})
		addrA := c
		round := 0
		// The run is bounded in time: once the budget is spent, the remaining checks take
		// a few steps each (rapid still counts them as valid).
		budget := time.Now().Add(20 * time.Second)
		rapid.Check(t, func(rt *rapid.T) {
			round++
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			u := routing.BucketUnit(uint32(round % testBuckets))
			src := e.table().Owner(u)
			if e.own(src, u).State == routing.StateNone {
				e.openOwner(u)
			}
			dst := other(src)
			cl := e.client()
			m := newModel()
			m.seed(t, cl, u, 20)
			actors := map[string]*actor{}
			names := []string{"d1", "d2", "cancel"}
			for _, name := range names {
				g := newGate()
				defer close(g.quit)
				clients := map[string]migrate.ShardClient{}
				for s, sc := range map[string]redis.UniversalClient{"a": addrA, "b": srv[1].Client(t)} {
					var gc redis.UniversalClient
					if cc, ok := sc.(*redis.ClusterClient); ok {
						gc = redis.NewClusterClient(&redis.ClusterOptions{Addrs: cc.Options().Addrs})
					} else {
						gc = redis.NewClient(&redis.Options{Addr: sc.(*redis.Client).Options().Addr})
					}
					gc.AddHook(g)
					defer gc.Close()
					clients[s] = gc
				}
				ctl := redis.NewClient(&redis.Options{Addr: srv[0].Addr()})
				ctl.AddHook(g)
				defer ctl.Close()
				co, err := migrate.New(ctl, migrate.Options{Shards: clients, Prefix: e.prefix, BatchSize: 8,
					LeaseTTL: 300 * time.Millisecond})
				require.NoError(rt, err)
				actors[name] = &actor{name: name, g: g, co: co}
			}
			co := e.coordinator(migrate.Options{LeaseTTL: 300 * time.Millisecond})
			st, err := co.Start(ctx, migrate.Spec{Unit: u, Target: dst})
			require.NoError(rt, err)
			check := func() {
				var open []string
				for _, s := range []string{"a", "b"} {
					if e.own(s, u).State == routing.StateOpen {
						open = append(open, s)
					}
				}
				require.LessOrEqual(rt, len(open), 1, "at most one open owner")
				js, err := co.Status(context.Background(), st.ID)
				require.NoError(rt, err)
				switch js.State {
				case migrate.OwnedA, migrate.Copying, migrate.CatchingUp:
					require.Equal(rt, []string{src}, open, "the source owns the unit until the barrier")
				case migrate.OwnedB:
					require.Equal(rt, []string{dst}, open)
					require.Equal(rt, dst, e.table().Owner(u))
				case migrate.Cancelled, migrate.Aborted:
					require.Equal(rt, []string{src}, open)
					require.Equal(rt, src, e.table().Owner(u))
					require.NotEqual(rt, st.ID, claimOf(t, e, dst, u), "no claim of an ended migration")
				}
			}
			steps := rapid.IntRange(5, 60).Draw(rt, "steps")
			if time.Now().After(budget) {
				steps = min(steps, 3)
			}
			for i := 0; i < steps; i++ {
				a := actors[rapid.SampledFrom(names).Draw(rt, "actor")]
				switch {
				case !a.running:
					if a.name == "cancel" && !rapid.Bool().Draw(rt, "cancel now") {
						continue
					}
					a.g.mu.Lock()
					a.g.paused = false
					a.g.mu.Unlock()
					a.start(ctx, st.ID)
					a.settle(rt)
				case rapid.IntRange(0, 9).Draw(rt, "pause") == 0:
					// The actor stops (its lease is no longer renewed) for a while.
					a.g.mu.Lock()
					a.g.paused = !a.g.paused
					a.g.mu.Unlock()
					time.Sleep(time.Duration(rapid.IntRange(0, 350).Draw(rt, "pause ms")) * time.Millisecond)
				case a.atGate:
					a.g.mu.Lock()
					a.g.paused = false
					a.g.mu.Unlock()
					a.atGate = false
					a.g.proceed <- rapid.IntRange(0, 7).Draw(rt, "lose") == 0
					a.settle(rt)
				}
				check()
			}
			// The end: every actor still running is let go, one command of each in turn (a
			// driver may wait for the lease of another, so none is run to its end alone),
			// then a last driver finishes.
			for running := true; running; {
				running = false
				for _, name := range names {
					a := actors[name]
					if !a.running {
						continue
					}
					running = true
					a.g.mu.Lock()
					a.g.paused = false
					a.g.mu.Unlock()
					if a.atGate {
						a.atGate = false
						a.g.proceed <- false
					}
					a.settle(rt)
					check()
				}
			}
			fin, err := co.Resume(ctx, st.ID)
			if err != nil {
				require.True(rt, errors.Is(err, migrate.ErrCancelled) || errors.Is(err, migrate.ErrAborted), "%v", err)
			}
			require.True(rt, fin.State.Terminal())
			check()
			want := src
			if fin.State == migrate.OwnedB {
				want = dst
			}
			require.Equal(rt, routing.StateOpen, e.own(want, u).State, "one open owner once no driver is active")
			claims, err := co.Claims(ctx, u)
			require.NoError(rt, err)
			require.Empty(rt, claims)
			m.check(t, e, want, u)
		})
	})
}
