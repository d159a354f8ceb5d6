package migrate_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
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

// ownScriptHash is the SHA1 of routing's ownership-transition script (the barrier of a
// unit's source), for fault matching.
func ownScriptHash(t testing.TB) string {
	src, err := os.ReadFile("../routing/own.lua")
	require.NoError(t, err)
	h := sha1.Sum(src)
	return hex.EncodeToString(h[:])
}

// requireFoldedBack requires tenant to be back in its bucket on shard a: no override, the
// bucket open and the tenant unmarked there, the override unit on b closed, no lock held.
func requireFoldedBack(t *testing.T, e *env, co *migrate.Coordinator, tenant, a, b string) {
	t.Helper()
	ctx := testkit.Ctx(t)
	bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
	tu := routing.TenantUnit(tenant)
	tb := e.table()
	require.NotContains(t, tb.Overrides, tenant)
	require.Equal(t, a, tb.BucketOwner(bu.Bucket))
	own, moved, err := e.shards[a].Ownership(ctx, bu)
	require.NoError(t, err)
	require.Equal(t, routing.StateOpen, own.State)
	require.NotContains(t, moved, tenant, "the bucket serves the tenant again")
	require.Equal(t, routing.StateClosed, e.own(b, tu).State, "the override unit is closed")
	unfinished, err := co.Unfinished(ctx)
	require.NoError(t, err)
	require.Empty(t, unfinished)
	// Both locks are free: the unit and the bucket start new migrations.
	for _, u := range []routing.Unit{tu, bu} {
		st, err := co.Start(ctx, migrate.Spec{Unit: u, Target: b})
		if u == tu {
			require.ErrorIs(t, err, migrate.ErrInvalid, "the table no longer assigns the override")
			continue
		}
		require.NoError(t, err, "the bucket's lock is free")
		_, err = co.Cancel(ctx, st.ID)
		require.NoError(t, err)
	}
}

// A carved-out tenant returns into its shared bucket while it and three neighbours keep
// writing: through clients on the table before the carve-out (the bucket refuses them
// until the fold-back), on the carve-out's table (the override unit refuses them after the
// barrier), and through a routing Router. The bucket still holds the carve-out's closed
// copy, with a record the tenant deleted since: the fold-back deletes that copy before
// copying, so nothing deleted comes back. The driver loses the reply of the barrier; a
// fresh coordinator resumes. At every instant at most one shard is writable for the
// tenant; the neighbours never meet a stale route; the tenant's part of the bucket equals
// its acknowledged history; Cleanup then empties the override unit.
func TestFoldBackReturnsATenantIntoItsBucketWhileItKeepsWriting(t *testing.T) {
	for name, e := range carveEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			fat := "fold-fat-" + name
			others := sameBucket(fat, "fold-small-"+name+"-", 3)
			bu := routing.BucketUnit(routing.BucketOf(fat, testBuckets))
			tu := routing.TenantUnit(fat)
			a := e.openOwner(bu)
			b := other(a)
			m := newTModel()
			preCarve := e.client()
			m.seed(t, preCarve, fat, 300)
			for _, o := range others {
				m.seed(t, preCarve, o, 30)
			}
			co := e.coordinator(migrate.Options{BatchSize: 100, LeaseTTL: 200 * time.Millisecond})
			carve, err := co.Carve(ctx, migrate.CarveSpec{ID: name + "-carve", Tenant: fat, Target: b})
			require.NoError(t, err)
			// The closed copy in the bucket has a record the tenant deletes on B: once its
			// tombstone is gone, only the wipe of the stale copy keeps it dead.
			ghost := routingfmt.RecordField(fat, "ghost")
			ka := routingfmt.Keys(e.shards[a].Keys().Tag(bu))
			require.NoError(t, e.clients[a].(redis.Cmdable).HSet(ctx, ka.Records, ghost, "1:l:boo").Err())

			stop := make(chan struct{})
			var fatStale, otherStale atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for i, c := range []*client{preCarve, e.client(), e.client()} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- m.writer(ctx, c, fat, fmt.Sprintf("fat%d", i), 40, stop, &fatStale)
				}()
			}
			rclients := map[string]routing.ShardClient{}
			for n, c := range e.clients {
				rclients[n] = c
			}
			rt, err := routing.New(e.control, routing.Options{Shards: rclients, Prefix: e.prefix})
			require.NoError(t, err)
			defer rt.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						errs <- nil
						return
					default:
					}
					key, opID := fmt.Sprintf("r-k%d", i%30), fmt.Sprintf("t%d-router-op%d", m.id, i)
					op := routing.Put(key, fmt.Sprintf("v%d", i))
					if i%5 == 2 {
						op = routing.Delete(key)
					}
					res, err := rt.Do(ctx, fat, opID, op)
					if err != nil {
						errs <- fmt.Errorf("router op %s: %w", opID, err)
						return
					}
					m.ack(fat, key, op, opID, res)
				}
			}()
			for _, o := range others {
				c := e.client()
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- m.writer(ctx, c, o, o, 20, stop, &otherStale)
				}()
			}
			// The client on the table before the carve-out met the bucket's refusal.
			require.Eventually(t, func() bool { return fatStale.Load() > 0 }, 30*time.Second, time.Millisecond)
			obs := e.tenantObserver(fat, a, b)
			before := fatStale.Load()

			inj := faults.New()
			lossy := map[string]migrate.ShardClient{}
			for n := range e.clients {
				lossy[n] = e.clients[n]
			}
			if name == "standalone" {
				addr := e.clients[b].(*redis.Client).Options().Addr
				lossy[b] = redis.NewClient(&redis.Options{Addr: addr, Dialer: inj.Dialer(nil), MaxRetries: -1})
				t.Cleanup(func() { _ = lossy[b].(*redis.Client).Close() })
				inj.DropReply(faults.Match{Command: "EVALSHA", Arg: ownScriptHash(t)}, 1)
			}
			co1, err := migrate.New(e.control, migrate.Options{Shards: lossy, Prefix: e.prefix, BatchSize: 100, LeaseTTL: 200 * time.Millisecond})
			require.NoError(t, err)
			st, err := co1.Fold(ctx, migrate.FoldSpec{ID: name + "-fold", Tenant: fat})
			if name == "standalone" {
				require.Error(t, err, "the barrier's reply was lost")
				require.Equal(t, int64(1), inj.Dropped())
				st, err = e.coordinator(migrate.Options{BatchSize: 100, LeaseTTL: 200 * time.Millisecond}).Resume(ctx, name+"-fold")
			}
			require.NoError(t, err)
			require.Equal(t, migrate.OwnedB, st.State)
			require.Equal(t, bu, st.Into)
			require.Equal(t, tu, st.Unit)
			require.Equal(t, b, st.Source)
			require.Equal(t, a, st.Target)
			require.Contains(t, st.String(), "fold-back into "+bu.String())

			require.Eventually(t, func() bool { return fatStale.Load() > before }, 30*time.Second, time.Millisecond,
				"the tenant's writers met the fold-back's barrier")
			// Let the writers acknowledge more writes on the new table, then stop.
			after := m.acked()
			require.Eventually(t, func() bool { return m.acked() >= after+20 }, 30*time.Second, time.Millisecond,
				"writes go on after the fold-back")
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			obs.finish(t)
			require.Zero(t, otherStale.Load(), "the bucket's other tenants never met a stale route")
			require.Equal(t, st.FlipGen, e.table().Generation)
			requireFoldedBack(t, e, co, fat, a, b)
			require.NotContains(t, e.records(a, bu), ghost, "the stale copy did not come back")
			m.check(t, e, a, bu, fat)
			for _, o := range others {
				m.check(t, e, a, bu, o)
			}

			// The rollback window: the override unit keeps its closed copy until Cleanup.
			require.NotEmpty(t, e.records(b, tu))
			_, err = co.Cleanup(ctx, st.ID)
			require.ErrorIs(t, err, migrate.ErrGraceNotElapsed)
			co3 := e.coordinator(migrate.Options{Grace: time.Millisecond})
			time.Sleep(5 * time.Millisecond)
			cst, err := co3.Cleanup(ctx, st.ID)
			require.NoError(t, err)
			require.True(t, cst.Cleaned)
			require.Empty(t, e.records(b, tu))
			// The carve-out's late cleanup finds the tenant live in its bucket again and
			// deletes nothing.
			_, err = co3.Cleanup(ctx, carve.ID)
			require.NoError(t, err)
			m.check(t, e, a, bu, fat)
			for _, o := range others {
				m.check(t, e, a, bu, o)
			}
		})
	}
}

// The course-72 trace across a fold-back: a seat confirmation of an overridden tenant is
// applied on its unit and the reply is lost; the tenant folds back into its bucket; the
// client retries through its stale table with the same op ID: the unit refuses, the client
// learns the new table, and the bucket returns the original result, applied once.
func TestFoldBackLostSeatConfirmationReplaysInTheBucket(t *testing.T) {
	srv := celebritytest.Shards(t, 3)
	inj := faults.New()
	lossy := srv[2].Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil); o.MaxRetries = -1 })
	e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": srv[2].Client(t)}, routing.ShardOptions{})
	cb, err := routing.NewShard("b", lossy, routing.ShardOptions{Prefix: e.prefix})
	require.NoError(t, err)
	ctx := testkit.Ctx(t)
	tenant := "course-72"
	bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
	tu := routing.TenantUnit(tenant)
	require.Equal(t, "a", e.openOwner(bu))
	co := e.coordinator(migrate.Options{})
	_, err = co.Carve(ctx, migrate.CarveSpec{Tenant: tenant, Target: "b"})
	require.NoError(t, err)
	route := e.table()

	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "confirm-72-alice"}, 1)
	_, err = cb.Exec(ctx, tu, route.Generation, tenant, "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.Error(t, err, "the reply was lost")
	require.Equal(t, int64(1), inj.Dropped())

	st, err := co.Fold(ctx, migrate.FoldSpec{Tenant: tenant})
	require.NoError(t, err)

	_, err = cb.Exec(ctx, tu, route.Generation, tenant, "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.ErrorIs(t, err, routing.ErrStaleRoute, "the closed unit refuses the stale route")
	cl := &client{e: e, t: route}
	res, stale, err := cl.tdo(ctx, tenant, "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.NoError(t, err)
	require.Equal(t, 1, stale)
	require.Equal(t, routing.Result{Applied: true, Version: 1, Replayed: true}, res, "the original confirmation")
	require.Equal(t, st.FlipGen, cl.table().Generation)
	require.Equal(t, []string{routingfmt.RecordField(tenant, "seat:17")}, tenantFields(e.records("a", bu), tenant))
	require.Equal(t, routing.Record{Version: 1, Value: "alice"}, e.records("a", bu)[routingfmt.RecordField(tenant, "seat:17")],
		"applied once")
	_, _, err = cl.tdo(ctx, tenant, "confirm-72-bob", routing.PutIf("seat:17", "bob", 0))
	require.ErrorIs(t, err, routing.ErrVersionMismatch, "nobody takes the seat again")
}

// Bad fold-back requests are refused with a clear error and change nothing; a tenant
// without records folds back all the same, and may be carved out again.
func TestFoldBackBadInputIsRefusedAndAnEmptyTenantWorks(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	nt := e.table().Next()
	nt.SetSpread("wide", []string{"a", "b"})
	require.NoError(t, e.store.Publish(ctx, nt))
	empty := "fold-empty"
	bu := routing.BucketUnit(routing.BucketOf(empty, testBuckets))
	a := e.openOwner(bu)
	b := other(a)
	co := e.coordinator(migrate.Options{})
	_, err := co.Carve(ctx, migrate.CarveSpec{ID: "carve", Tenant: empty, Target: b})
	require.NoError(t, err)
	gen := e.table().Generation
	own := e.own(b, routing.TenantUnit(empty))
	_, movedBefore, err := e.shards[a].Ownership(ctx, bu)
	require.NoError(t, err)
	// A client for a shard the table names but the coordinator does not know.
	partial := migrate.Options{Shards: map[string]migrate.ShardClient{b: e.clients[b]}, Prefix: e.prefix}
	cp, err := migrate.New(e.control, partial)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		co   *migrate.Coordinator
		spec migrate.FoldSpec
	}{
		{"empty tenant", co, migrate.FoldSpec{Tenant: ""}},
		{"tenant not UTF-8", co, migrate.FoldSpec{Tenant: "a\xff"}},
		{"not overridden", co, migrate.FoldSpec{Tenant: "in-its-bucket"}},
		{"spread", co, migrate.FoldSpec{Tenant: "wide"}},
		{"wrong source", co, migrate.FoldSpec{Tenant: empty, Source: a}},
		{"wrong target", co, migrate.FoldSpec{Tenant: empty, Target: b}},
		{"unknown target", co, migrate.FoldSpec{Tenant: empty, Target: "zz"}},
		{"no client for the bucket's shard", cp, migrate.FoldSpec{Tenant: empty}},
		{"braces in id", co, migrate.FoldSpec{ID: "x{y}", Tenant: empty}},
		{"id of the carve-out", co, migrate.FoldSpec{ID: "carve", Tenant: empty}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.co.Fold(ctx, tc.spec)
			require.ErrorIs(t, err, migrate.ErrInvalid)
			t.Log(err)
		})
	}
	require.Equal(t, gen, e.table().Generation, "nothing was published")
	require.Equal(t, own, e.own(b, routing.TenantUnit(empty)))
	_, moved, err := e.shards[a].Ownership(ctx, bu)
	require.NoError(t, err)
	require.Equal(t, movedBefore, moved, "no mark changed")
	unfinished, err := co.Unfinished(ctx)
	require.NoError(t, err)
	require.Empty(t, unfinished)

	st, err := co.Fold(ctx, migrate.FoldSpec{ID: "fold", Tenant: empty, Source: b, Target: a})
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	require.Zero(t, st.Copied)
	requireFoldedBack(t, e, co, empty, a, b)
	res, err := e.shards[a].Exec(ctx, bu, e.table().Generation, empty, "e-1", routing.Put("k", "v"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Version)
	again, err := co.StartFold(ctx, migrate.FoldSpec{ID: "fold", Tenant: empty})
	require.NoError(t, err, "a retry of the start finds the record")
	require.Equal(t, migrate.OwnedB, again.State)
	_, err = co.Fold(ctx, migrate.FoldSpec{Tenant: empty})
	require.ErrorIs(t, err, migrate.ErrInvalid, "a tenant in its bucket does not fold back")
	st, err = co.Carve(ctx, migrate.CarveSpec{Tenant: empty, Target: b})
	require.NoError(t, err, "the tenant is carved out again")
	require.Equal(t, migrate.OwnedB, st.State)
	require.Equal(t, b, e.table().Overrides[empty])
}

// A fold-back holds both locks: neither a move of the override unit, nor a move or
// carve-out of the bucket starts meanwhile.
func TestFoldBackHoldsTheUnitAndTheBucketLocks(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	fat := "fold-lock"
	neighbour := sameBucket(fat, "fold-lock-n-", 1)[0]
	bu := routing.BucketUnit(routing.BucketOf(fat, testBuckets))
	tu := routing.TenantUnit(fat)
	a := e.openOwner(bu)
	b := other(a)
	m := newTModel()
	c := e.client()
	m.seed(t, c, fat, 30)
	co := e.coordinator(migrate.Options{})
	_, err := co.Carve(ctx, migrate.CarveSpec{Tenant: fat, Target: b})
	require.NoError(t, err)
	st, err := co.StartFold(ctx, migrate.FoldSpec{ID: "f1", Tenant: fat})
	require.NoError(t, err)
	var busy *migrate.BusyError
	_, err = co.Start(ctx, migrate.Spec{Unit: tu, Target: a})
	require.ErrorAs(t, err, &busy)
	require.Equal(t, "f1", busy.Holder)
	_, err = co.Start(ctx, migrate.Spec{Unit: bu, Target: b})
	require.ErrorAs(t, err, &busy)
	require.Equal(t, "f1", busy.Holder)
	_, err = co.StartCarve(ctx, migrate.CarveSpec{Tenant: neighbour, Target: b})
	require.ErrorIs(t, err, migrate.ErrBusy)
	_, err = co.StartFold(ctx, migrate.FoldSpec{ID: "f2", Tenant: fat})
	require.ErrorIs(t, err, migrate.ErrBusy)
	_, err = co.Resume(ctx, st.ID)
	require.NoError(t, err)
	requireFoldedBack(t, e, co, fat, a, b)
	m.check(t, e, a, bu, fat)
}

// A fold-back cancelled while it copies, and one that aborts after its barrier (its copy in
// the bucket was tampered with), leave the tenant on its override unit: writable there, the
// bucket holding nothing of it and still refusing it, no lock held.
func TestFoldBackCancelAndAbortKeepTheTenantOnItsUnit(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	tenant := "fold-back-off"
	bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
	tu := routing.TenantUnit(tenant)
	a := e.openOwner(bu)
	b := other(a)
	m := newTModel()
	cl := e.client()
	m.seed(t, cl, tenant, 200)
	co := e.coordinator(migrate.Options{BatchSize: 20})
	_, err := co.Carve(ctx, migrate.CarveSpec{ID: "carve", Tenant: tenant, Target: b})
	require.NoError(t, err)
	_, err = e.coordinator(migrate.Options{Grace: time.Nanosecond}).Cleanup(ctx, "carve")
	require.NoError(t, err)

	var cancelled migrate.Status
	var cancelErr error
	coc := e.coordinator(migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
		if s.State == migrate.Copying && s.Copied > 0 && cancelled.ID == "" {
			cancelled, cancelErr = e.coordinator(migrate.Options{}).Cancel(context.Background(), s.ID)
		}
	}})
	st, err := coc.Fold(ctx, migrate.FoldSpec{ID: "f1", Tenant: tenant})
	require.NoError(t, cancelErr)
	require.Equal(t, migrate.Cancelled, cancelled.State)
	require.ErrorIs(t, err, migrate.ErrCancelled)
	require.Equal(t, migrate.Cancelled, st.State)
	requireKept := func() {
		t.Helper()
		require.Equal(t, b, e.table().Overrides[tenant])
		require.Equal(t, routing.StateOpen, e.own(b, tu).State)
		require.Empty(t, tenantFields(e.records(a, bu), tenant), "the bucket holds nothing of the tenant")
		_, moved, err := e.shards[a].Ownership(ctx, bu)
		require.NoError(t, err)
		require.Contains(t, moved, tenant, "the bucket still refuses the tenant")
		unfinished, err := co.Unfinished(ctx)
		require.NoError(t, err)
		require.Empty(t, unfinished)
		op := routing.Put("after", "x")
		id := fmt.Sprintf("after-%d", time.Now().UnixNano())
		res, stale, err := e.client().tdo(ctx, tenant, id, op)
		require.NoError(t, err)
		require.Zero(t, stale, "a client on the current table writes at once")
		m.ack(tenant, "after", op, id, res)
		m.check(t, e, b, tu, tenant)
		mv, err := co.Start(ctx, migrate.Spec{Unit: bu, Target: b})
		require.NoError(t, err, "the bucket's lock is free")
		_, err = co.Cancel(ctx, mv.ID)
		require.NoError(t, err)
	}
	requireKept()

	dctx, stopDriver := context.WithCancel(ctx)
	defer stopDriver()
	victim := routingfmt.RecordField(tenant, "seed-1")
	var tampered atomic.Bool
	co2 := e.coordinator(migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
		if s.State == migrate.ClosedA && s.Barrier != "" && tampered.CompareAndSwap(false, true) {
			k := routingfmt.Keys(e.shards[a].Keys().Tag(bu))
			require.NoError(t, e.clients[a].(redis.Cmdable).HSet(context.Background(), k.Records, victim, "999:l:evil").Err())
			stopDriver()
		}
	}})
	stopW := make(chan struct{})
	var stale atomic.Int64
	done := make(chan error, 1)
	// A paced writer: the catch-up (batches of 20) must outrun it on a loaded machine too;
	// flat out it writes about as fast as the catch-up applies and the source stays open
	// for hundreds of rounds.
	m.pace = 5 * time.Millisecond
	go func() { done <- m.writer(ctx, e.client(), tenant, "w", 10, stopW, &stale) }()
	_, err = co2.Fold(dctx, migrate.FoldSpec{ID: "f2", Tenant: tenant})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, tampered.Load())
	require.Equal(t, routing.StateClosed, e.own(b, tu).State, "the unit is closed at the barrier")
	st, err = e.coordinator(migrate.Options{}).Resume(ctx, "f2")
	require.ErrorIs(t, err, migrate.ErrAborted)
	var ve *migrate.VerifyError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []string{victim}, ve.Differ, "the error names the differing key")
	require.Equal(t, migrate.Aborted, st.State)
	close(stopW)
	require.NoError(t, <-done)
	requireKept()
}

// A fold-back whose driver loses the reply of one command (of each script in turn: the
// takeover, the claim of the tenant's mark in the bucket, the wipe of the stale copy, a
// journal step, a probe of the unit, a copy batch, the barrier, the opening of the tenant
// in the bucket, the table's publication) is resumed by the same coordinator and finishes,
// while every tenant of the bucket keeps writing; standalone and cluster shards, every
// client of the coordinator lossy. The tenants folded back hold exactly their acknowledged
// history in the bucket, and so does the neighbour that stayed.
func TestFoldBackSurvivesALostReplyOfEachScript(t *testing.T) {
	celebritytest.Long(t)
	srv := celebritytest.Shards(t, 3)
	cl := celebritytest.SharedCluster(t)
	sb := celebritytest.Standalone(t)
	h := migrate.ScriptHashes()
	for _, name := range []string{"standalone", "cluster"} {
		t.Run(name, func(t *testing.T) {
			inj := faults.New()
			var e *env
			var lossy map[string]migrate.ShardClient
			var control migrate.Control
			var addrB string
			lossyStd := func(addr string) *redis.Client {
				c := redis.NewClient(&redis.Options{Addr: addr, Dialer: inj.Dialer(nil), MaxRetries: -1})
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			if name == "standalone" {
				e = newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": srv[2].Client(t)}, routing.ShardOptions{})
				control = lossyStd(srv[0].Addr())
				lossy = map[string]migrate.ShardClient{"a": lossyStd(srv[1].Addr()), "b": lossyStd(srv[2].Addr())}
				addrB = srv[2].Addr()
			} else {
				e = newEnvOver(t, cl.Client(t), map[string]migrate.ShardClient{"a": cl.Client(t), "b": sb.Client(t)}, routing.ShardOptions{})
				lc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Dialer: inj.Dialer(nil), MaxRetries: -1, MaxRedirects: -1})
				t.Cleanup(func() { _ = lc.Close() })
				control = lc
				lossy = map[string]migrate.ShardClient{"a": lc, "b": lossyStd(sb.Addr())}
				addrB = sb.Addr()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			// The tenants' bucket is on b (so the target's commands are told apart by
			// address); they are carved out onto a first.
			type lostCase struct{ what, arg, addr string }
			k := 0 // the deployment's share of the cases in quick mode
			if name == "cluster" {
				k = 1
			}
			var cases []lostCase
			for i, tc := range []lostCase{
				{"none", "", ""},
				{"takeover", h["acquire"], ""},
				{"claim", "claim", addrB},
				{"wipe", "wipe", addrB},
				{"journal step", h["step"], ""},
				{"probe", h["probe"], ""},
				{"copy batch", "apply", addrB},
				{"publish", `"overrides":{`, ""},
				{"barrier", ownScriptHash(t), ""},
				{"open", "open", addrB},
			} {
				// Quick mode loses each script's reply on one of the two deployments,
				// alternating.
				if celebritytest.Spread(i, k, 2) {
					cases = append(cases, tc)
				}
			}
			t.Logf("cases %v (%s=1 runs all ten on both deployments)", cases, celebritytest.FullEnv)
			var stay string
			for i := 0; ; i++ {
				stay = fmt.Sprintf("lostfold-stay-%s-%d", name, i)
				if e.openOwner(routing.BucketUnit(routing.BucketOf(stay, testBuckets))) == "b" {
					break
				}
			}
			tenants := sameBucket(stay, "lostfold-fat-"+name+"-", len(cases))
			bu := routing.BucketUnit(routing.BucketOf(stay, testBuckets))
			m := newTModel()
			m.pace = 2 * time.Millisecond
			seeder := e.client()
			for _, tn := range append([]string{stay}, tenants...) {
				m.seed(t, seeder, tn, 40)
			}
			co0 := e.coordinator(migrate.Options{BatchSize: 100})
			for i, tn := range tenants {
				_, err := co0.Carve(ctx, migrate.CarveSpec{ID: fmt.Sprintf("%s-lostfold-c%d", name, i), Tenant: tn, Target: "a"})
				require.NoError(t, err)
			}
			stop := make(chan struct{})
			var foldedStale, stayStale atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, len(tenants)+1)
			for i, tn := range append([]string{stay}, tenants...) {
				c, counter := e.client(), &foldedStale
				if i == 0 {
					counter = &stayStale
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- m.writer(ctx, c, tn, fmt.Sprintf("w%d", i), 10, stop, counter)
				}()
			}
			co, err := migrate.New(control, migrate.Options{Shards: lossy, Prefix: e.prefix, BatchSize: 100,
				LeaseTTL: 300 * time.Millisecond})
			require.NoError(t, err)
			for i, tc := range cases {
				id := fmt.Sprintf("%s-lostfold-%d", name, i)
				before := inj.Dropped()
				if tc.arg != "" {
					inj.DropReply(faults.Match{Command: "EVALSHA", Arg: tc.arg, Addr: tc.addr}, 1)
				}
				st, err := co.Fold(ctx, migrate.FoldSpec{ID: id, Tenant: tenants[i]})
				for attempt := 0; err != nil && attempt < 5; attempt++ {
					require.NotErrorIs(t, err, migrate.ErrAborted, "%s: %v", tc.what, err)
					st, err = co.Resume(ctx, id)
				}
				require.NoError(t, err, tc.what)
				require.Equal(t, migrate.OwnedB, st.State, tc.what)
				if tc.arg != "" {
					require.Equal(t, before+1, inj.Dropped(), "%s: a reply was lost", tc.what)
				}
				require.NotContains(t, e.table().Overrides, tenants[i], tc.what)
				require.Equal(t, routing.StateClosed, e.own("a", routing.TenantUnit(tenants[i])).State, tc.what)
				_, moved, err := e.shards["b"].Ownership(ctx, bu)
				require.NoError(t, err)
				require.NotContains(t, moved, tenants[i], tc.what)
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Zero(t, stayStale.Load(), "the neighbour that stayed never met a stale route")
			require.Positive(t, foldedStale.Load())
			for _, tn := range append([]string{stay}, tenants...) {
				m.check(t, e, "b", bu, tn)
			}
		})
	}
}
