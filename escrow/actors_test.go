package escrow

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/script"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// gate holds back the first command of a client that runs script s (EVALSHA or EVAL), so
// the actor behind that client pauses between what it read and the write that depends on
// it. Reached is closed when the command arrives; the command runs after open.
type gate struct {
	s       *script.Script
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func newGate(s *script.Script) *gate {
	return &gate{s: s, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) open() { close(g.release) }

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 {
			name := strings.ToLower(fmt.Sprint(args[0]))
			body := fmt.Sprint(args[1])
			// EVAL (the NOSCRIPT fallback) carries the source: match it by its SHA1, which is
			// the script's hash (fmt.Sprint of the Script itself read its fields unlocked).
			if (name == "evalsha" && body == g.s.Hash()) || (name == "eval" && sha1Hex(body) == g.s.Hash()) {
				hit := false
				g.once.Do(func() { hit = true })
				if hit {
					close(g.reached)
					select {
					case <-g.release:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
			}
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// pausedPool is a second actor on the same pool: its client holds back its first command
// running s until the gate opens.
func pausedPool(t *testing.T, c *redis.Client, opts PoolOptions, s *script.Script) (*Pool, *gate) {
	t.Helper()
	g := newGate(s)
	c.AddHook(g)
	p, err := NewPool(c, opts)
	require.NoError(t, err)
	return p, g
}

// restoredPool starts a ledger server with AOF and a witness on another server, and returns
// the ledger server, the options and an initialised pool of owners a (1..5) and b (6..10).
func restoredPool(t *testing.T) (*celebritytest.Server, PoolOptions, *Pool) {
	t.Helper()
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	opts := PoolOptions{Name: "p", Prefix: celebritytest.NewPrefix(t), Capacity: 10, Owners: owners(10, "a", "b"),
		Witness: celebritytest.Standalone(t).Client(t)}
	return srv, opts, newTestPool(t, srv.Client(t), opts)
}

// TestStaleWitnessReadCannotRegrantAfterRestore: an actor reads a's witness and pauses
// before its acquire script runs; another actor is granted a permit; a's server is restored
// from an AOF copy taken before that grant; the paused actor resumes. It must not be granted
// the victim's permit with the victim's token: the ledger is fenced instead.
func TestStaleWitnessReadCannotRegrantAfterRestore(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	srv, opts, p := restoredPool(t)
	_, err := p.Acquire(ctx, "a", "first")
	require.NoError(t, err)
	snap := srv.Snapshot(t)

	late, g := pausedPool(t, srv.Client(t), opts, acquireScript)
	type result struct {
		g   Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		gr, err := late.Acquire(ctx, "a", "late")
		done <- result{gr, err}
	}()
	<-g.reached
	victim, err := p.Acquire(ctx, "a", "victim")
	require.NoError(t, err)
	srv.RestoreSnapshot(t, snap)
	g.open()
	res := <-done
	require.ErrorIs(t, res.err, ErrFenced, "the late actor was granted permit %d token %d; the victim holds permit %d token %d",
		res.g.Permit, res.g.Token, victim.Permit, victim.Token)

	_, err = p.Acquire(ctx, "a", "next")
	require.ErrorIs(t, err, ErrFenced, "the ledger stays fenced")
	require.NoError(t, p.Reconcile(ctx, "a"))
	again, err := p.Acquire(ctx, "a", "late")
	require.NoError(t, err)
	require.Greater(t, again.Token, victim.Token, "a grant after the restore has a token above every acknowledged one")
	requireClean(t, p)
}

// TestStaleWitnessReadCannotFreezeAGrantedPermit is the same race through Freeze: the
// paused freeze must not move the victim's permit to b, which would grant it again.
func TestStaleWitnessReadCannotFreezeAGrantedPermit(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	srv, opts, p := restoredPool(t)
	_, err := p.Acquire(ctx, "a", "first")
	require.NoError(t, err)
	snap := srv.Snapshot(t)

	late, g := pausedPool(t, srv.Client(t), opts, freezeScript)
	type result struct {
		f   Frozen
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := late.Freeze(ctx, "a", "b", 1, "T")
		done <- result{f, err}
	}()
	<-g.reached
	victim, err := p.Acquire(ctx, "a", "victim")
	require.NoError(t, err)
	srv.RestoreSnapshot(t, snap)
	g.open()
	res := <-done
	require.ErrorIs(t, res.err, ErrFenced, "the late freeze took permits %v; the victim holds permit %d", res.f.Permits, victim.Permit)
	require.NoError(t, p.Reconcile(ctx, "a"))
	rep, err := p.Recover(ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Pending)
	requireClean(t, p)
}

// clusterPlacement returns options whose owners a and b have their ledgers on two different
// masters of cl, and whose witnesses are on neither of b's master nor their own ledger's.
func clusterPlacement(t testing.TB, cl *celebritytest.Cluster, c *redis.ClusterClient, capacity int) PoolOptions {
	t.Helper()
	for n := 0; n < 1000; n++ {
		opts := PoolOptions{Name: fmt.Sprint("p", n), Prefix: celebritytest.NewPrefix(t), Capacity: capacity, Owners: owners(capacity, "a", "b")}
		p, err := NewPool(c, opts)
		require.NoError(t, err)
		ma, mb := cl.MasterOf(p.ledgers["a"].keys[0]), cl.MasterOf(p.ledgers["b"].keys[0])
		wa, wb := cl.MasterOf(p.WitnessKey("a")), cl.MasterOf(p.WitnessKey("b"))
		if ma != mb && wa != ma && wa != mb && wb != mb {
			return opts
		}
	}
	t.Fatal("no placement found")
	return PoolOptions{}
}

// restoreMaster restores one master of cl from snap and waits until every master reports
// the cluster healthy again (a restarted node is "down" until it has rejoined).
func restoreMaster(t *testing.T, cl *celebritytest.Cluster, m *celebritytest.Server, snap celebritytest.Snapshot) {
	t.Helper()
	m.RestoreSnapshot(t, snap)
	require.Eventually(t, func() bool {
		for _, s := range cl.Masters() {
			info, err := s.AdminClient(t).ClusterInfo(testkit.Ctx(t)).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond)
}

// TestTransfersAcrossARestoredTarget restores the target's master of a transfer to an earlier
// point (a real AOF copy) on a 3-master cluster, and checks that neither Reconcile nor
// Recover lets the transfer's permits exist at two owners.
func TestTransfersAcrossARestoredTarget(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel()
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{AOF: true})

	// b durably refused T and a aborted it; b's master then loses the refusal. Reconcile(b)
	// must record the refusal again, or a late delivery of T lands while a has T's permits.
	t.Run("refusal lost, then Reconcile", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		c := cl.Client(t)
		opts := clusterPlacement(t, cl, c, 10)
		p := newTestPool(t, c, opts)
		f, err := p.Freeze(ctx, "a", "b", 2, "T")
		require.NoError(t, err)
		mb := cl.MasterOf(p.ledgers["b"].keys[0])
		snap := mb.Snapshot(t)
		require.NoError(t, p.Cancel(ctx, "a", "T"))
		restoreMaster(t, cl, mb, snap)

		require.ErrorIs(t, p.Deliver(ctx, f), ErrFenced)
		require.NoError(t, p.Reconcile(ctx, "b"))
		require.ErrorIs(t, p.Deliver(ctx, f), ErrRefused, "a late delivery of an aborted transfer must never land")
		rep := requireClean(t, p)
		require.Equal(t, []int{5, 5}, []int{rep.Owners[0].Free, rep.Owners[1].Free})
	})

	// b accepted T, the process died before Complete, b sent T's permits back to a (T2), and
	// b's master then loses the accept. Reconcile(b), then Recover, must not deliver T again
	// as new: its permits are at a already.
	t.Run("accept lost, permits moved on, Reconcile then Recover", func(t *testing.T) {
		ctx := testkit.Ctx(t)
		c := cl.Client(t)
		opts := clusterPlacement(t, cl, c, 10)
		p := newTestPool(t, c, opts)
		f, err := p.Freeze(ctx, "a", "b", 2, "T")
		require.NoError(t, err)
		mb := cl.MasterOf(p.ledgers["b"].keys[0])
		snap := mb.Snapshot(t)
		require.NoError(t, p.Deliver(ctx, f)) // and the process dies before Complete
		require.NoError(t, p.Transfer(ctx, "b", "a", 2, "T2"))
		restoreMaster(t, cl, mb, snap)

		require.NoError(t, p.Reconcile(ctx, "b"))
		rec, err := p.Recover(ctx)
		require.NoError(t, err)
		require.Empty(t, rec.Pending)
		rep := requireClean(t, p)
		require.Empty(t, rep.Pending)
		require.Equal(t, []int{5, 5}, []int{rep.Owners[0].Free, rep.Owners[1].Free})
	})
}

// TestEveryCallAgainstASecondActorAndARestore runs each mutating call of a Pool paused
// between what it read (the witness) and its script, while a second actor acts on the same
// ledger. In the "second actor" run the call then resumes against the newer state; in the
// "restore" run the ledgers' server is first restored from an AOF copy taken before the
// second actor acted, so the call resumes against a ledger that forgot an acknowledged step.
// Either way no permit may be in two places, and after a restore no step of the restored
// ledger may be acknowledged.
func TestEveryCallAgainstASecondActorAndARestore(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel()
	type call struct {
		name   string
		script *script.Script
		setup  func(ctx context.Context, t *testing.T, p *Pool)
		run    func(ctx context.Context, p *Pool) error
		second func(ctx context.Context, p *Pool) error
		at     string // the owner the second actor acts at
		// restored is what run returns after the restore (nil: the call does not read the
		// witness, and the ledger is fenced at the next step instead).
		restored error
	}
	acquireAt := func(owner string) func(ctx context.Context, p *Pool) error {
		return func(ctx context.Context, p *Pool) error { _, err := p.Acquire(ctx, owner, "victim"); return err }
	}
	freezeT := func(ctx context.Context, t *testing.T, p *Pool) {
		_, err := p.Freeze(ctx, "a", "b", 2, "T")
		require.NoError(t, err)
	}
	calls := []call{
		{name: "Acquire", script: acquireScript, second: acquireAt("a"), restored: ErrFenced,
			run: func(ctx context.Context, p *Pool) error { _, err := p.Acquire(ctx, "a", "late"); return err }},
		{name: "Freeze", script: freezeScript, second: acquireAt("a"), restored: ErrFenced,
			run: func(ctx context.Context, p *Pool) error { _, err := p.Freeze(ctx, "a", "b", 1, "L"); return err }},
		{name: "Deliver", script: acceptScript, setup: freezeT, second: acquireAt("b"), at: "b", restored: ErrFenced,
			run: func(ctx context.Context, p *Pool) error {
				return p.Deliver(ctx, Frozen{ID: "T", From: "a", To: "b", Permits: []int{1, 2}, Seq: 2})
			}},
		{name: "Complete", script: settleScript, second: acquireAt("a"), restored: ErrFenced,
			setup: func(ctx context.Context, t *testing.T, p *Pool) {
				f, err := p.Freeze(ctx, "a", "b", 2, "T")
				require.NoError(t, err)
				require.NoError(t, p.Deliver(ctx, f))
			},
			run: func(ctx context.Context, p *Pool) error { return p.Complete(ctx, "a", "T") }},
		{name: "Cancel", script: refuseScript, setup: freezeT, second: acquireAt("b"), at: "b", restored: ErrFenced,
			run: func(ctx context.Context, p *Pool) error { return p.Cancel(ctx, "a", "T") }},
		{name: "Release", script: releaseScript, second: acquireAt("a"), restored: nil,
			setup: func(ctx context.Context, t *testing.T, p *Pool) {
				_, err := p.Acquire(ctx, "a", "late")
				require.NoError(t, err)
			},
			run: func(ctx context.Context, p *Pool) error { return p.Release(ctx, "a", "late") }},
	}
	for _, c := range calls {
		for _, restore := range []bool{false, true} {
			name := c.name + "/second actor"
			if restore {
				name = c.name + "/restore"
			}
			t.Run(name, func(t *testing.T) {
				ctx := testkit.Ctx(t)
				srv, opts, p := restoredPool(t)
				if c.setup != nil {
					c.setup(ctx, t, p)
				}
				snap := srv.Snapshot(t)
				paused, g := pausedPool(t, srv.Client(t), opts, c.script)
				done := make(chan error, 1)
				go func() { done <- c.run(ctx, paused) }()
				<-g.reached
				require.NoError(t, c.second(ctx, p))
				if restore {
					srv.RestoreSnapshot(t, snap)
				}
				g.open()
				err := <-done
				if !restore {
					require.NoError(t, err)
					_, err := p.Recover(ctx)
					require.NoError(t, err)
					requireClean(t, p)
					return
				}
				if c.restored != nil {
					require.ErrorIs(t, err, c.restored)
				}
				at := c.at
				if at == "" {
					at = "a"
				}
				_, err = p.Acquire(ctx, at, "after")
				require.ErrorIs(t, err, ErrFenced, "%s's ledger forgot an acknowledged step", at)
				for _, o := range p.Owners() {
					if err := p.Reconcile(ctx, o); err != nil {
						require.ErrorContains(t, err, "not fenced")
					}
				}
				_, err = p.Recover(ctx)
				require.NoError(t, err)
				requireClean(t, p)
			})
		}
	}
}

// TestStaleWitnessReadCannotRegrantAfterRestoreOnCluster is the paused-acquire race on a
// 3-master cluster: the ledger's master is restored from an AOF copy while the witness, on
// another master, keeps the victim's grant.
func TestStaleWitnessReadCannotRegrantAfterRestoreOnCluster(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel()
	ctx := testkit.Ctx(t)
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{AOF: true})
	opts := clusterPlacement(t, cl, cl.Client(t), 10)
	p := newTestPool(t, cl.Client(t), opts)
	_, err := p.Acquire(ctx, "a", "first")
	require.NoError(t, err)
	m := cl.MasterOf(p.ledgers["a"].keys[0])
	require.NotSame(t, m, cl.MasterOf(p.WitnessKey("a")))
	snap := m.Snapshot(t)

	g := newGate(acquireScript)
	lc := cl.Client(t)
	lc.AddHook(g)
	late, err := NewPool(lc, opts)
	require.NoError(t, err)
	type result struct {
		g   Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		gr, err := late.Acquire(ctx, "a", "late")
		done <- result{gr, err}
	}()
	<-g.reached
	victim, err := p.Acquire(ctx, "a", "victim")
	require.NoError(t, err)
	restoreMaster(t, cl, m, snap)
	g.open()
	res := <-done
	require.ErrorIs(t, res.err, ErrFenced, "the late actor was granted permit %d token %d; the victim holds permit %d token %d",
		res.g.Permit, res.g.Token, victim.Permit, victim.Token)
	require.NoError(t, p.Reconcile(ctx, "a"))
	again, err := p.Acquire(ctx, "a", "late")
	require.NoError(t, err)
	require.Greater(t, again.Token, victim.Token)
	requireClean(t, p)
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
