package escrow

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/script"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestRenewOnARestoredLedgerIsNotAcknowledged: a holder's lease ends while it is paused, the
// permit is granted again (confirmed by the witness), and the ledger's server is then
// restored from an AOF copy taken while the old holder still held the permit. The old holder
// resumes and renews: it must not be told it holds the permit (another job does, with a
// larger token). Its lease ended more than LeaseSkew ago by the server's clock (the permit
// could not have been granted again otherwise), so the renewal is refused with ErrNotHeld
// before the witness is asked; the next grant finds the restored ledger behind its witness
// and fences it.
func TestRenewOnARestoredLedgerIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	srv, opts, _ := restoredPool(t)
	opts.Name = "lease"
	opts.Capacity = 2
	opts.Owners = owners(2, "a", "b")
	opts.Lease = 100 * time.Millisecond
	opts.LeaseSkew = 50 * time.Millisecond
	p := newTestPool(t, srv.Client(t), opts)
	old, err := p.Acquire(ctx, "a", "old")
	require.NoError(t, err)
	snap := srv.Snapshot(t)
	var next Grant
	require.Eventually(t, func() bool {
		next, err = p.Acquire(ctx, "a", "next")
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the permit comes back after lease and skew")
	require.Equal(t, old.Permit, next.Permit)

	srv.RestoreSnapshot(t, snap)
	exp, err := p.Renew(ctx, "a", "old")
	require.Error(t, err, "the old holder was told it holds permit %d until %v; job next holds it with token %d > %d",
		old.Permit, exp, next.Token, old.Token)
	require.ErrorIs(t, err, ErrNotHeld, "old's lease ended more than LeaseSkew ago")
	require.ErrorIs(t, p.Release(ctx, "a", "old"), ErrNotHeld, "the refused renewal took old's permit back")
	_, err = p.Acquire(ctx, "a", "probe")
	require.ErrorIs(t, err, ErrFenced, "the restored ledger is behind its witness")
	require.ErrorIs(t, p.Release(ctx, "a", "probe"), ErrFenced, "the restored ledger stays fenced")
	require.NoError(t, p.Reconcile(ctx, "a"))
	requireClean(t, p)
}

// nthGate holds back the nth command of a client that runs script s, like gate.
type nthGate struct {
	*gate
	n    int
	seen atomic.Int32
}

func (g *nthGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	held := g.gate.ProcessHook(next)
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 {
			name := strings.ToLower(fmt.Sprint(args[0]))
			if (name == "evalsha" && fmt.Sprint(args[1]) == g.s.Hash()) || (name == "eval" && sha1Hex(fmt.Sprint(args[1])) == g.s.Hash()) {
				if int(g.seen.Add(1)) == g.n {
					return held(ctx, cmd)
				}
			}
		}
		return next(ctx, cmd)
	}
}

// TestRestoreLostPausedAcrossAnotherRestoreLost: two operators (or one operator's retry from
// another process) put back the permits of a lost ledger. The first reads the pool, sees the
// lost permits missing and pauses (before its claim, or after it, before its write); the
// second tries to restore them at another owner; the first resumes. The lost permits must
// come back once, not at two owners.
func TestRestoreLostPausedAcrossAnotherRestoreLost(t *testing.T) {
	t.Parallel()
	for _, at := range []string{"before the claim", "before the write"} {
		t.Run(at, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			srv, opts, _ := restoredPool(t)
			opts.Owners = owners(10, "a", "b", "c")
			opts.Name = "lost"
			p := newTestPool(t, srv.Client(t), opts)
			c := srv.Client(t)
			require.NoError(t, c.Del(ctx, p.ledgers["c"].keys...).Err())
			require.NoError(t, p.Reconcile(ctx, "c"))
			rep, err := p.Audit(ctx)
			require.NoError(t, err)
			lost := rep.Missing
			require.NotEmpty(t, lost)

			lc := srv.Client(t)
			lw := celebritytest.Standalone(t).Client(t)
			var g *gate
			if at == "before the claim" {
				// Loaded first, so that the calls counted are the read and the claim, not
				// an EVALSHA answered NOSCRIPT (on a server no earlier test used) and its EVAL.
				require.NoError(t, script.Load(ctx, celebritytest.Standalone(t).AdminClient(t), restoreScript))
				ng := &nthGate{gate: newGate(restoreScript), n: 2} // 1: read the register, 2: claim
				lw.AddHook(ng)
				g = ng.gate
			} else {
				g = newGate(reconcileScript)
				lc.AddHook(g)
			}
			lopts := opts
			lopts.Witness = lw
			late, err := NewPool(lc, lopts)
			require.NoError(t, err)
			type result struct {
				ps  []int
				err error
			}
			done := make(chan result, 1)
			go func() {
				ps, err := late.RestoreLost(ctx, "a", "ops-1")
				done <- result{ps, err}
			}()
			<-g.reached
			other, otherErr := p.RestoreLost(ctx, "b", "ops-2")
			g.open()
			res := <-done
			rep, err = p.Audit(ctx)
			require.NoError(t, err)
			require.Empty(t, rep.Duplicated, "the late restore put back %v at a (%v) after %v came back at b (%v)", res.ps, res.err, other, otherErr)
			if at == "before the claim" {
				require.NoError(t, otherErr)
				require.Equal(t, lost, other)
				require.ErrorIs(t, res.err, ErrConflict)
			} else {
				require.ErrorIs(t, otherErr, ErrConflict, "a restore is under way")
				require.NoError(t, res.err)
				require.Equal(t, lost, res.ps)
				again, err := p.RestoreLost(ctx, "b", "ops-2")
				require.NoError(t, err)
				require.Empty(t, again, "nothing is missing any more")
			}
			requireClean(t, p)
		})
	}
}

// TestReconcilePausedAcrossAnotherReconcile: a's server is restored to a point before an
// acknowledged step, and a paused acquire is then granted on the restored history (never
// acknowledged: the ledger is fenced). Reconcile R1 reads the pool (its plan frees that
// grant) and pauses before its write; Reconcile R2 runs whole, the job retries and is granted
// a permit, acknowledged. R1 resumes: its stale plan must not free the permit the job now
// holds, or the next acquire gets it too.
func TestReconcilePausedAcrossAnotherReconcile(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	srv, opts, p := restoredPool(t)
	snap := srv.Snapshot(t)

	late, g := pausedPool(t, srv.Client(t), opts, acquireScript)
	done := make(chan error, 1)
	go func() {
		_, err := late.Acquire(ctx, "a", "late")
		done <- err
	}()
	<-g.reached
	_, err := p.Acquire(ctx, "a", "gone")
	require.NoError(t, err)
	require.NoError(t, p.Release(ctx, "a", "gone"))
	srv.RestoreSnapshot(t, snap)
	g.open()
	require.ErrorIs(t, <-done, ErrFenced)

	r1, g1 := pausedPool(t, srv.Client(t), opts, reconcileScript)
	done = make(chan error, 1)
	go func() { done <- r1.Reconcile(ctx, "a") }()
	<-g1.reached
	require.NoError(t, p.Reconcile(ctx, "a"))
	held, err := p.Acquire(ctx, "a", "late")
	require.NoError(t, err)
	g1.open()
	r1Err := <-done
	require.ErrorIs(t, r1Err, ErrConflict, "R1's plan was computed from a state R2 repaired")
	next, err := p.Acquire(ctx, "a", "next")
	if err == nil {
		require.NotEqual(t, held.Permit, next.Permit, "late holds permit %d (token %d) and next was granted it too (token %d); R1: %v",
			held.Permit, held.Token, next.Token, r1Err)
	}
	hs, err := p.Holders(ctx, "a")
	require.NoError(t, err)
	jobs := map[string]int{}
	for _, h := range hs {
		jobs[h.Job] = h.Permit
	}
	require.Equal(t, held.Permit, jobs["late"], "the acknowledged grant of late is still held (R1: %v)", r1Err)
	requireClean(t, p)
}

// TestReconcileAndRestoreLostWithALostRebaseReply: the reply of the witness step that starts
// a new chain (Reconcile, RestoreLost) is lost after the command ran, and go-redis retries
// it. The retry must be an idempotent repeat, not a refusal of the new chain.
func TestReconcileAndRestoreLostWithALostRebaseReply(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	srv, opts, _ := restoredPool(t)
	opts.Owners = owners(10, "a", "b", "c")
	opts.Name = "rebase"
	p := newTestPool(t, srv.Client(t), opts)
	snap := srv.Snapshot(t)
	_, err := p.Acquire(ctx, "a", "gone")
	require.NoError(t, err)
	require.NoError(t, p.Release(ctx, "a", "gone"))
	srv.RestoreSnapshot(t, snap)
	_, err = p.Acquire(ctx, "a", "next")
	require.ErrorIs(t, err, ErrFenced)

	inj := faults.New()
	fopts := opts
	fopts.Witness = celebritytest.Standalone(t).Client(t, func(o *redis.Options) { o.Dialer, o.MaxRetries = inj.Dialer(nil), 3 })
	fp, err := NewPool(srv.Client(t), fopts)
	require.NoError(t, err)
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "rebase"}, 1)
	require.NoError(t, fp.Reconcile(ctx, "a"))
	require.EqualValues(t, 1, inj.Dropped())
	_, err = p.Acquire(ctx, "a", "next")
	require.NoError(t, err)

	require.NoError(t, srv.Client(t).Del(ctx, p.ledgers["c"].keys...).Err())
	require.NoError(t, p.Reconcile(ctx, "c"))
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "rebase"}, 1)
	restored, err := fp.RestoreLost(ctx, "b", "ops")
	require.NoError(t, err)
	require.NotEmpty(t, restored)
	require.EqualValues(t, 2, inj.Dropped())
	requireClean(t, p)
}

// TestCentralInitPausedAcrossALostLedger: Init reads the Central's marker (absent: a fresh
// deployment) and pauses before it creates the ledger. Another process's Init creates it and
// grants its only permit; the ledger's server then loses it (FLUSHALL). The paused Init
// resumes: it must not re-create the ledger with its permit free while the old holder runs.
func TestCentralInitPausedAcrossALostLedger(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	opts := CentralOptions{Name: "l", Capacity: 1, Prefix: celebritytest.NewPrefix(t), AllowWeakDurability: true,
		Witness: celebritytest.Standalone(t).Client(t)}
	lc := srv.Client(t)
	g := newGate(initScript)
	lc.AddHook(g)
	late, err := NewCentral(lc, opts)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- late.Init(ctx) }()
	<-g.reached

	cl, err := NewCentral(srv.Client(t), opts)
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx))
	old, err := cl.Acquire(ctx, "old-holder")
	require.NoError(t, err)
	require.NoError(t, srv.AdminClient(t).FlushAll(ctx).Err())
	g.open()
	require.ErrorIs(t, <-done, ErrLedgerMissing, "the paused Init re-created a lost ledger")
	again, err := cl.Acquire(ctx, "new")
	require.Error(t, err, "permit %d granted again (token %d) while old-holder holds it (token %d)", again.Permit, again.Token, old.Token)

	require.NoError(t, cl.RestoreLost(ctx))
	require.NoError(t, cl.Init(ctx))
	require.NoError(t, late.Init(ctx))
	again, err = cl.Acquire(ctx, "new")
	require.NoError(t, err)
	require.Greater(t, again.Token, old.Token)
	requireClean(t, cl)
}

// TestWitnessRestoredAloneOrWithTheLedger: the witness's server is restored to an earlier
// point while the ledger goes on: the ledger's newer steps are confirmed again and it keeps
// granting. Then both are restored, to different points, the ledger to before an
// acknowledged grant and the witness to after it: the ledger is fenced before it grants
// that permit again.
func TestWitnessRestoredAloneOrWithTheLedger(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	wsrv := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	opts := PoolOptions{Name: "w", Prefix: celebritytest.NewPrefix(t), Capacity: 20, Owners: owners(20, "a", "b"),
		Witness: wsrv.Client(t)}
	p := newTestPool(t, srv.Client(t), opts)
	_, err := p.Acquire(ctx, "a", "j1")
	require.NoError(t, err)
	w0 := wsrv.Snapshot(t)
	for _, j := range []string{"j2", "j3"} {
		_, err = p.Acquire(ctx, "a", j)
		require.NoError(t, err)
	}
	wsrv.RestoreSnapshot(t, w0)
	g4, err := p.Acquire(ctx, "a", "j4")
	require.NoError(t, err, "a healthy ledger ahead of a restored witness is confirmed again")
	require.Equal(t, 4, g4.Permit)
	requireClean(t, p)

	l1 := srv.Snapshot(t)
	victim, err := p.Acquire(ctx, "a", "victim")
	require.NoError(t, err)
	w1 := wsrv.Snapshot(t)
	_, err = p.Acquire(ctx, "a", "j6")
	require.NoError(t, err)
	srv.RestoreSnapshot(t, l1)
	wsrv.RestoreSnapshot(t, w1)
	g, err := p.Acquire(ctx, "a", "late")
	require.ErrorIs(t, err, ErrFenced, "late got permit %d token %d; victim holds permit %d token %d", g.Permit, g.Token, victim.Permit, victim.Token)
	require.NoError(t, p.Reconcile(ctx, "a"))
	g, err = p.Acquire(ctx, "a", "late")
	require.NoError(t, err)
	require.Greater(t, g.Token, victim.Token)
}

// TestConfirmationAfterTheLogWindow: an acquire's witness confirmation is held back while
// more than the log's 1024 steps happen on its ledger. It is not acknowledged
// (ErrUnconfirmed); the job's retry finds its grant and has it confirmed, with the same
// permit and token, and no (permit, token) pair is granted twice.
func TestConfirmationAfterTheLogWindow(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t)
	srv, opts, p := restoredPool(t)
	lw := celebritytest.Standalone(t).Client(t)
	g := newGate(witnessScript)
	lw.AddHook(g)
	lopts := opts
	lopts.Witness = lw
	late, err := NewPool(srv.Client(t), lopts)
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
	seen := map[[2]int64]string{}
	for i := range 1030 {
		job := fmt.Sprintf("j%d", i)
		gr, err := p.Acquire(ctx, "a", job)
		require.NoError(t, err)
		k := [2]int64{int64(gr.Permit), gr.Token}
		require.Empty(t, seen[k], "permit %d token %d granted twice", gr.Permit, gr.Token)
		seen[k] = job
		require.NoError(t, p.Release(ctx, "a", job))
	}
	g.open()
	res := <-done
	require.ErrorIs(t, res.err, ErrUnconfirmed)
	again, err := p.Acquire(ctx, "a", "late")
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Empty(t, seen[[2]int64{int64(again.Permit), again.Token}], "the late grant's permit and token were granted to another job")
	hs, err := p.Holders(ctx, "a")
	require.NoError(t, err)
	require.Len(t, hs, 1, "every other job released")
	require.Equal(t, Holder{Job: "late", Permit: again.Permit, Token: again.Token}, hs[0])
	requireClean(t, p)
}
