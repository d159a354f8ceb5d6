package migrate_test

import (
	"context"
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
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// freeze is a go-redis hook that, from the first script call carrying an argument equal to
// arg on, holds that call and every later command of its client until released: a driver
// process stopped (SIGSTOP) just before that write, its lease no longer renewed.
type freeze struct {
	arg      string
	mu       sync.Mutex
	armed    bool
	reached  chan struct{}
	released chan struct{}
}

func newFreeze(arg string) *freeze {
	return &freeze{arg: arg, reached: make(chan struct{}), released: make(chan struct{})}
}

func (h *freeze) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *freeze) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.held(ctx) != nil {
			return ctx.Err()
		}
		return next(ctx, cmds)
	}
}
func (h *freeze) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := strings.ToLower(cmd.Name()); n == "hello" || n == "client" || n == "auth" {
			return next(ctx, cmd)
		}
		if strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") {
			for _, a := range cmd.Args()[1:] {
				if s, ok := a.(string); ok && s == h.arg {
					h.mu.Lock()
					if !h.armed {
						h.armed = true
						close(h.reached)
					}
					h.mu.Unlock()
					break
				}
			}
		}
		if err := h.held(ctx); err != nil {
			return err
		}
		return next(ctx, cmd)
	}
}

// held waits while the hook is armed and not released.
func (h *freeze) held(ctx context.Context) error {
	h.mu.Lock()
	armed := h.armed
	h.mu.Unlock()
	if !armed {
		return nil
	}
	select {
	case <-h.released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *freeze) wait(t testing.TB) {
	t.Helper()
	select {
	case <-h.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the frozen call was never made")
	}
}

// frozenCoordinator returns a coordinator over e whose control client freezes at its
// first table publication.
func frozenCoordinator(t *testing.T, e *env, lease time.Duration) (*migrate.Coordinator, *freeze) {
	t.Helper()
	ctl := redis.NewClient(&redis.Options{Addr: e.control.(*redis.Client).Options().Addr,
		Username: e.control.(*redis.Client).Options().Username, Password: e.control.(*redis.Client).Options().Password})
	t.Cleanup(func() { _ = ctl.Close() })
	h := newFreeze(routing.Keys{Prefix: e.prefix}.Channel())
	ctl.AddHook(h)
	co, err := migrate.New(ctl, migrate.Options{Prefix: e.prefix, Shards: e.clients, LeaseTTL: lease})
	require.NoError(t, err)
	return co, h
}

// resumeWhenFree resumes migration id once the frozen driver's lease ran out.
func resumeWhenFree(t *testing.T, co *migrate.Coordinator, id string) migrate.Status {
	t.Helper()
	ctx := testkit.Ctx(t)
	for {
		st, err := co.Resume(ctx, id)
		if errors.Is(err, migrate.ErrDriverBusy) {
			select {
			case <-ctx.Done():
				t.Fatalf("the frozen driver's lease never ran out: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		require.NoError(t, err)
		return st
	}
}

// A split driver stopped just before it publishes its table, whose split another driver then
// took over and finished, and whose tenant was re-split afterwards (a later move), publishes
// nothing when it wakes: it is fenced, the table keeps the later spread and the data is the
// acknowledged history. The same for a re-split driver stopped before its reshaped
// publication, overtaken and followed by a re-split back.
func TestSplitDriverStoppedBeforeItsFlipPublishesNothingAfterALaterMove(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	ctx := testkit.Ctx(t)
	tenant := "split-late"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 200)
	lease := 300 * time.Millisecond
	co := e.coordinator(migrate.Options{LeaseTTL: lease})

	steps := []struct {
		first, later []string
	}{
		{[]string{"b", "c", "d", "a"}, []string{"c", "d", "a", "b", "b", "c", "d", "a"}}, // 1->4, then 4->8
		{[]string{"a", "b", "c", "d"}, []string{"b", "c", "d", "a", "a", "b", "c", "d"}}, // 8->4, then 4->8
	}
	for i, s := range steps {
		paused, h := frozenCoordinator(t, e, lease)
		id := fmt.Sprintf("paused-%d", i)
		done := make(chan error, 1)
		go func() {
			_, err := paused.Split(ctx, migrate.SplitSpec{ID: id, Tenant: tenant, Targets: s.first})
			done <- err
		}()
		h.wait(t)
		fin := resumeWhenFree(t, co, id)
		require.Equal(t, migrate.OwnedB, fin.State)
		require.Equal(t, s.first, e.table().Spreads[tenant])
		m.seed(t, e.client(), tenant, 20)
		later, err := co.Split(ctx, migrate.SplitSpec{Tenant: tenant, Targets: s.later})
		require.NoError(t, err)
		require.Equal(t, migrate.OwnedB, later.State)
		want := e.table()
		close(h.released)
		err = <-done
		require.ErrorIs(t, err, migrate.ErrFenced, "the stopped driver is refused")
		require.Equal(t, want, e.table(), "the stopped driver published nothing")
		require.Equal(t, s.later, e.table().Spreads[tenant])
		m.checkSpread(t, e, tenant)
		m.seed(t, e.client(), tenant, 10)
		m.checkSpread(t, e, tenant)
	}
}

// Two drivers of one split at once: the first is stopped right after it closed its sources
// (the barrier), a second takes the split over and finishes it, then the first wakes: it
// changes nothing (fenced) and the spread holds the acknowledged history.
func TestSplitTwoDriversOfOneSplit(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	ctx := testkit.Ctx(t)
	tenant := "split-two"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 200)
	lease := 300 * time.Millisecond
	co := e.coordinator(migrate.Options{LeaseTTL: lease})
	st, err := co.Split(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"b", "c", "d", "a"}})
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)

	// The re-split's first driver stops at its first ReadyB step (after every barrier).
	ctl := redis.NewClient(&redis.Options{Addr: e.control.(*redis.Client).Options().Addr,
		Username: e.control.(*redis.Client).Options().Username, Password: e.control.(*redis.Client).Options().Password})
	t.Cleanup(func() { _ = ctl.Close() })
	h := newFreeze(string(migrate.ReadyB))
	ctl.AddHook(h)
	paused, err := migrate.New(ctl, migrate.Options{Prefix: e.prefix, Shards: e.clients, LeaseTTL: lease})
	require.NoError(t, err)
	stop := make(chan struct{})
	var stale, nstale atomic.Int64
	e.override("split-two-n", "b")
	wait := splitWriters(t, e, m, 1, tenant, "split-two-n", stop, &stale, &nstale)
	done := make(chan error, 1)
	go func() {
		_, err := paused.Split(ctx, migrate.SplitSpec{ID: "two", Tenant: tenant, Targets: []string{"c", "d", "a", "b", "b", "c", "d", "a"}})
		done <- err
	}()
	h.wait(t)
	fin := resumeWhenFree(t, co, "two")
	require.Equal(t, migrate.OwnedB, fin.State)
	close(stop)
	wait()
	close(h.released)
	require.ErrorIs(t, <-done, migrate.ErrFenced)
	require.Len(t, e.table().Spreads[tenant], 8)
	m.checkSpread(t, e, tenant)
}

// A write whose reply was lost before a split (and one whose reply was lost between the
// split and a re-split), retried with the same op ID through a router on each of the three
// generations (before the split, after it, after the re-split), returns its original result
// every time and is applied once.
func TestSplitLostReplyRetriedThroughEveryGeneration(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	ctx := testkit.Ctx(t)
	tenant := "split-gens"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 50)

	lossy := func(shard string) (*routing.Shard, *faults.Injector) {
		inj := faults.New()
		c := redis.NewClient(&redis.Options{Addr: e.clients[shard].(*redis.Client).Options().Addr, Dialer: inj.Dialer(nil), MaxRetries: -1,
			Username: e.clients[shard].(*redis.Client).Options().Username, Password: e.clients[shard].(*redis.Client).Options().Password})
		t.Cleanup(func() { _ = c.Close() })
		s, err := routing.NewShard(shard, c, routing.ShardOptions{Prefix: e.prefix})
		require.NoError(t, err)
		return s, inj
	}

	gen0 := e.table()
	sa, inj := lossy("a")
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "lost-1"}, 1)
	_, err := sa.Exec(ctx, routing.TenantUnit(tenant), gen0.Generation, tenant, "lost-1", routing.PutIf("seat:1", "alice", 0))
	require.Error(t, err)
	require.Equal(t, int64(1), inj.Dropped())
	m.ack(tenant, "seat:1", routing.PutIf("seat:1", "alice", 0), "lost-1", routing.Result{Applied: true, Version: 1})
	co := e.coordinator(migrate.Options{})
	_, err = co.Split(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"b", "c", "d", "a"}})
	require.NoError(t, err)
	gen1 := e.table()

	want1 := routing.Result{Applied: true, Version: 1, Replayed: true}
	for _, g := range []*routing.Table{gen0, gen1} {
		res, _, err := (&client{e: e, t: g}).tdo(ctx, tenant, "lost-1", routing.PutIf("seat:1", "alice", 0))
		require.NoError(t, err)
		require.Equal(t, want1, res, "generation %d", g.Generation)
	}

	// A second write, in the spread, loses its reply too.
	u2, s2 := routeKey(gen1, tenant, "seat:2")
	sh, inj2 := lossy(s2)
	inj2.DropReply(faults.Match{Command: "EVALSHA", Arg: "lost-2"}, 1)
	_, err = sh.Exec(ctx, u2, gen1.Generation, tenant, "lost-2", routing.PutIf("seat:2", "bob", 0))
	require.Error(t, err)
	require.Equal(t, int64(1), inj2.Dropped())
	m.ack(tenant, "seat:2", routing.PutIf("seat:2", "bob", 0), "lost-2", routing.Result{Applied: true, Version: 1})

	_, err = co.Split(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"c", "d", "a", "b", "b", "c", "d", "a"}})
	require.NoError(t, err)
	gen2 := e.table()
	for _, g := range []*routing.Table{gen0, gen1, gen2} {
		res, _, err := (&client{e: e, t: g}).tdo(ctx, tenant, "lost-1", routing.PutIf("seat:1", "alice", 0))
		require.NoError(t, err)
		require.Equal(t, want1, res, "lost-1 through generation %d", g.Generation)
		res, _, err = (&client{e: e, t: g}).tdo(ctx, tenant, "lost-2", routing.PutIf("seat:2", "bob", 0))
		require.NoError(t, err)
		require.Equal(t, want1, res, "lost-2 through generation %d", g.Generation)
	}
	// Applied once, each in the sub-bucket of its key; nobody takes the seats again.
	for key, val := range map[string]string{"seat:1": "alice", "seat:2": "bob"} {
		u, s := routeKey(gen2, tenant, key)
		f := routingfmt.RecordField(tenant, key)
		require.Equal(t, routing.Record{Version: 1, Value: val}, e.records(s, u)[f], key)
		for j, o := range gen2.Spreads[tenant] {
			if uu := routing.SpreadUnit(tenant, uint32(j)); uu != u {
				_, there := e.records(o, uu)[f]
				require.False(t, there, "%s is only in its own sub-bucket", key)
			}
		}
		_, _, err := e.client().tdo(ctx, tenant, "again-"+key, routing.PutIf(key, "eve", 0))
		require.ErrorIs(t, err, routing.ErrVersionMismatch)
	}
	m.checkSpread(t, e, tenant)
}

// A width change asked for while another move of the tenant is in flight is refused with
// ErrBusy and changes nothing; once that move ends, it runs. Both ways: a split while one
// sub-bucket moves, and a move of a sub-bucket (or of the override) while a split is in
// flight.
func TestSplitWidthChangeWhileAnotherMoveIsInFlight(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	ctx := testkit.Ctx(t)
	tenant := "split-busy"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 60)
	co := e.coordinator(migrate.Options{})

	// The override is moving: no split.
	mv, err := co.Start(ctx, migrate.Spec{Unit: routing.TenantUnit(tenant), Target: "b"})
	require.NoError(t, err)
	before := e.table()
	_, err = co.StartSplit(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"b", "c", "d", "a"}})
	require.ErrorIs(t, err, migrate.ErrBusy)
	require.Equal(t, before, e.table())
	_, err = co.Cancel(ctx, mv.ID)
	require.NoError(t, err)

	// A split is in flight: no move of the override, nor of a sub-bucket it will create.
	sp, err := co.StartSplit(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"b", "c", "d", "a"}})
	require.NoError(t, err)
	_, err = co.Start(ctx, migrate.Spec{Unit: routing.TenantUnit(tenant), Target: "c"})
	require.ErrorIs(t, err, migrate.ErrBusy)
	_, err = co.StartSplit(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"c", "d"}})
	require.ErrorIs(t, err, migrate.ErrBusy)
	st, err := co.Resume(ctx, sp.ID)
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)

	// One sub-bucket is moving: no re-split; a re-split in flight: no sub-bucket move.
	mv, err = co.Start(ctx, migrate.Spec{Unit: routing.SpreadUnit(tenant, 2), Target: "b"})
	require.NoError(t, err)
	before = e.table()
	_, err = co.StartSplit(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"c", "d", "a", "b", "b", "c", "d", "a"}})
	require.ErrorIs(t, err, migrate.ErrBusy)
	require.Equal(t, before, e.table())
	_, err = co.Cancel(ctx, mv.ID)
	require.NoError(t, err)
	sp, err = co.StartSplit(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"c", "d", "a", "b", "b", "c", "d", "a"}})
	require.NoError(t, err)
	for j, src := range []string{"b", "c", "d", "a"} {
		_, err = co.Start(ctx, migrate.Spec{Unit: routing.SpreadUnit(tenant, uint32(j)), Target: other4(src)})
		require.ErrorIs(t, err, migrate.ErrBusy, "sub-bucket %d", j)
	}
	st, err = co.Resume(ctx, sp.ID)
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	m.checkSpread(t, e, tenant)
}

// A Cancel racing the flip: the driver is stopped just before it publishes (after the
// barrier); the Cancel is refused (ErrCancelRefused) and takes nothing over; the driver
// finishes, and the spread holds the acknowledged history.
func TestSplitCancelRacingTheFlip(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	ctx := testkit.Ctx(t)
	tenant := "split-cancel-flip"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 100)
	paused, h := frozenCoordinator(t, e, 30*time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := paused.Split(ctx, migrate.SplitSpec{ID: "race", Tenant: tenant, Targets: []string{"b", "c", "d", "a"}})
		done <- err
	}()
	h.wait(t)
	_, err := e.coordinator(migrate.Options{}).Cancel(ctx, "race")
	require.ErrorIs(t, err, migrate.ErrCancelRefused)
	close(h.released)
	require.NoError(t, <-done)
	st, err := e.coordinator(migrate.Options{}).Status(ctx, "race")
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	m.checkSpread(t, e, tenant)
}

// A target shard restored to an earlier snapshot (taken while the copy was running) after
// the barrier and the verification, before the flip: its import claim is still there, but
// records copied after the snapshot are gone. The driver must stop with an error rather than
// open that target and publish a table under which acknowledged writes are missing; with no
// target open yet, it aborts and reopens the source.
func TestSplitTargetRestoredBeforeTheFlipStopsTheSplit(t *testing.T) {
	srv := celebritytest.Shards(t, 4)
	tgt := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": tgt.Client(t),
		"c": srv[2].Client(t), "d": srv[3].Client(t)}, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	tenant := "split-restore"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 300)

	var snap celebritytest.Snapshot
	var took, restored bool
	co := e.coordinator(migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
		switch {
		case s.State == migrate.Copying && !took:
			// The claim is on b; the copy has not started.
			took = true
			snap = tgt.Snapshot(t)
		case s.State == migrate.ReadyB && !restored:
			restored = true
			tgt.RestoreSnapshot(t, snap)
		}
	}})
	_, err := co.Split(ctx, migrate.SplitSpec{ID: "restore", Tenant: tenant, Targets: []string{"b", "c", "d", "a"}})
	require.True(t, restored)
	require.ErrorIs(t, err, migrate.ErrAborted, "the split stops")
	require.ErrorIs(t, err, migrate.ErrOwnershipChanged)
	require.ErrorContains(t, err, `target "b"`)
	require.Equal(t, "a", e.table().Overrides[tenant], "no table with the spread")
	require.NotContains(t, e.table().Spreads, tenant)
	for j, s := range []string{"b", "c", "d", "a"} {
		require.NotEqual(t, routing.StateOpen, e.own(s, routing.SpreadUnit(tenant, uint32(j))).State, "sub-bucket %d", j)
	}
	// No target was opened: the abort reopened the source, which keeps the tenant's data.
	require.Equal(t, routing.StateOpen, e.own("a", routing.TenantUnit(tenant)).State)
	_, err = e.coordinator(migrate.Options{}).Resume(ctx, "restore")
	require.ErrorIs(t, err, migrate.ErrAborted)
	require.Equal(t, "a", e.table().Overrides[tenant])
	m.check(t, e, "a", routing.TenantUnit(tenant), tenant)
}

// other4 names a shard of a, b, c, d other than s.
func other4(s string) string {
	if s == "a" {
		return "b"
	}
	return "a"
}

// A source shard restored to an earlier snapshot while the split catches up (acknowledged
// writes made after the snapshot vanish from the source, but were copied already): the
// split must not publish a spread that differs from what its source holds; it stops with a
// clear error and the tenant stays on its override, open.
func TestSplitSourceRestoredDuringTheCopyStopsTheSplit(t *testing.T) {
	srv := celebritytest.Shards(t, 4)
	src := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": src.Client(t), "b": srv[1].Client(t),
		"c": srv[2].Client(t), "d": srv[3].Client(t)}, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	tenant := "split-srcrestore"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 100)

	var snap celebritytest.Snapshot
	var took, restored bool
	co := e.coordinator(migrate.Options{OnState: func(s migrate.Status) {
		switch {
		case s.State == migrate.Copying && !took:
			took = true
			snap = src.Snapshot(t)
			for i := range 30 {
				c := &client{e: e, t: e.table()}
				_, _, err := c.tdo(ctx, tenant, fmt.Sprintf("late-%d", i), routing.Put(fmt.Sprintf("late-%d", i), "x"))
				require.NoError(t, err)
			}
		case s.State == migrate.CatchingUp && !restored:
			restored = true
			src.RestoreSnapshot(t, snap)
		}
	}})
	_, err := co.Split(ctx, migrate.SplitSpec{ID: "srcrestore", Tenant: tenant, Targets: []string{"b", "c", "d", "a"}})
	require.True(t, restored)
	t.Logf("split: %v", err)
	require.Error(t, err, "the split stops")
	require.Equal(t, "a", e.table().Overrides[tenant], "no table with the spread")
	require.NotContains(t, e.table().Spreads, tenant)
	require.Equal(t, routing.StateOpen, e.own("a", routing.TenantUnit(tenant)).State)
	m.check(t, e, "a", routing.TenantUnit(tenant), tenant)
}

// Readers of a spread tenant through a routing Router keep reading while the spread is
// re-split 4 -> 8 -> 4, merged back into one unit and split again 1 -> 2: every read
// succeeds, finds the key, and never returns a version older than the one acknowledged to
// the writer before the read began (no read from a stale copy, no going back in time).
func TestSplitReadersDuringTheWidthChange(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	ctx := testkit.Ctx(t)
	tenant := "split-read"
	e.override(tenant, "a")
	co := e.coordinator(migrate.Options{})
	_, err := co.Split(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"b", "c", "d", "a"}})
	require.NoError(t, err)

	rclients := map[string]routing.ShardClient{}
	for n, c := range e.clients {
		rclients[n] = c
	}
	newRouter := func() *routing.Router {
		rt, err := routing.New(e.control, routing.Options{Shards: rclients, Prefix: e.prefix})
		require.NoError(t, err)
		t.Cleanup(func() { _ = rt.Close() })
		return rt
	}
	wr, rd := newRouter(), newRouter()
	const keys = 24
	var acked [keys]atomic.Uint64
	for k := range keys {
		res, err := wr.Do(ctx, tenant, fmt.Sprintf("r0-%d", k), routing.Put(fmt.Sprintf("rk%d", k), "v"))
		require.NoError(t, err)
		acked[k].Store(res.Version)
	}
	stop := make(chan struct{})
	errs := make(chan error, 3)
	var reads atomic.Int64
	go func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			k := i % keys
			res, err := wr.Do(ctx, tenant, fmt.Sprintf("r%d-%d", i, k), routing.Put(fmt.Sprintf("rk%d", k), fmt.Sprintf("v%d", i)))
			if err != nil {
				errs <- fmt.Errorf("write %d: %w", i, err)
				return
			}
			acked[k].Store(res.Version)
		}
	}()
	for g := range 2 {
		go func() {
			for i := g; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				k := i % keys
				floor := acked[k].Load()
				rec, ok, err := rd.Get(ctx, tenant, fmt.Sprintf("rk%d", k))
				if err != nil || !ok || rec.Version < floor {
					errs <- fmt.Errorf("read rk%d: %+v found=%v err=%v, acknowledged version %d before the read", k, rec, ok, err, floor)
					return
				}
				reads.Add(1)
			}
		}()
	}
	// 4 -> 8 -> 4, then a merge back into one unit on b (one target) and a split of that
	// override again.
	for _, targets := range [][]string{{"c", "d", "a", "b", "b", "c", "d", "a"}, {"a", "b", "c", "d"}, {"b"}, {"c", "d"}} {
		n := reads.Load()
		st, err := co.Split(ctx, migrate.SplitSpec{Tenant: tenant, Targets: targets})
		require.NoError(t, err)
		require.Equal(t, migrate.OwnedB, st.State)
		require.Eventually(t, func() bool { return reads.Load() > n+100 }, 30*time.Second, time.Millisecond)
	}
	close(stop)
	for range 3 {
		require.NoError(t, <-errs)
	}
}

// Deletes racing the copy: while the first batches of a re-split's snapshot are applied,
// the tenant deletes keys already copied and keys not copied yet (and rewrites some it
// deleted). No deleted record comes back, every tombstone keeps its version, and the spread
// holds exactly the acknowledged history.
func TestSplitDeletesRacingTheCopy(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	ctx := testkit.Ctx(t)
	tenant := "split-del"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 300)
	co := e.coordinator(migrate.Options{BatchSize: 10})
	_, err := co.Split(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"b", "c", "d", "a"}})
	require.NoError(t, err)
	m.checkSpread(t, e, tenant)

	for round, targets := range [][]string{{"c", "d", "a", "b", "b", "c", "d", "a"}, {"a", "b", "c", "d"}} {
		var batches atomic.Int64
		co := e.coordinator(migrate.Options{BatchSize: 10})
		migrate.SetBeforeApply(co, func(ctx context.Context, id string, items []migrate.Item, apply func([]migrate.Item) error) {
			if batches.Add(1) > 3 {
				return
			}
			c := e.client()
			del := func(key, opID string, op routing.Op) {
				res, _, err := c.tdo(ctx, tenant, opID, op)
				require.NoError(t, err)
				m.ack(tenant, key, op, opID, res)
			}
			for _, it := range items {
				if !it.Record {
					continue
				}
				_, key, ok := routingfmt.SplitRecordField(it.Field)
				require.True(t, ok)
				// A key in this very batch: deleted before the batch lands.
				del(key, fmt.Sprintf("del-%d-%s", round, key), routing.Delete(key))
			}
			for i := 0; i < 300; i += 7 {
				key := fmt.Sprintf("seed-%d", i)
				del(key, fmt.Sprintf("del-%d-b%d-%s", round, batches.Load(), key), routing.Delete(key))
				if i%2 == 0 {
					del(key, fmt.Sprintf("put-%d-b%d-%s", round, batches.Load(), key), routing.Put(key, "again"))
				}
			}
		})
		st, err := co.Split(ctx, migrate.SplitSpec{Tenant: tenant, Targets: targets})
		require.NoError(t, err)
		require.Equal(t, migrate.OwnedB, st.State)
		require.Positive(t, batches.Load())
		m.checkSpread(t, e, tenant)
	}
}
