package migrate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// routeKey routes a tenant's key by table t the way routing's Router does: its override,
// else its sub-bucket xxhash64(key) % K if it is spread, else its hash bucket.
func routeKey(t *routing.Table, tenant, key string) (routing.Unit, string) {
	if ss, ok := t.Spreads[tenant]; ok && t.Overrides[tenant] == "" {
		sub := hashing.Bucket(key, uint64(len(ss)))
		return routing.SpreadUnit(tenant, uint32(sub)), ss[sub]
	}
	return routeTenant(t, tenant)
}

// splitEnvs returns a standalone env (control and shards a, b, c, d on five servers) and a
// cluster env (control and shard a on the shared cluster, shards b, c, d standalone).
// so, if given, are the shards' routing options.
func splitEnvs(t *testing.T, so ...routing.ShardOptions) map[string]*env {
	var o routing.ShardOptions
	if len(so) > 0 {
		o = so[0]
	}
	srv := celebritytest.Shards(t, 5)
	std := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": srv[2].Client(t),
		"c": srv[3].Client(t), "d": srv[4].Client(t)}, o)
	cl := celebritytest.SharedCluster(t)
	more := celebritytest.Shards(t, 3)
	clu := newEnvOver(t, cl.Client(t), map[string]migrate.ShardClient{"a": cl.Client(t), "b": more[0].Client(t),
		"c": more[1].Client(t), "d": more[2].Client(t)}, o)
	return map[string]*env{"standalone": std, "cluster": clu}
}

// override publishes a table that overrides tenant onto shard and opens its unit there.
func (e *env) override(tenant, shard string) {
	e.t.Helper()
	nt := e.table().Next()
	nt.SetOverride(tenant, shard)
	require.NoError(e.t, e.store.Publish(testkit.Ctx(e.t), nt))
	require.Equal(e.t, shard, e.openOwner(routing.TenantUnit(tenant)))
}

// placement is the units that hold tenant under table t, with their shards.
func placement(t *routing.Table, tenant string) []routing.Placement {
	if o := t.Overrides[tenant]; o != "" {
		return []routing.Placement{{Unit: routing.TenantUnit(tenant), Shard: o}}
	}
	var out []routing.Placement
	for i, s := range t.Spreads[tenant] {
		out = append(out, routing.Placement{Unit: routing.SpreadUnit(tenant, uint32(i)), Shard: s})
	}
	return out
}

// spreadObserver counts instants at which a unit of the old placement and a unit of the new
// one were open at once: it reads every old unit, every new unit, every old unit again, and
// only a new-open read between two reads that found the same old unit open proves it.
func (e *env) spreadObserver(old, next []routing.Placement) *observer {
	o := &observer{stop: make(chan struct{}), done: make(chan struct{})}
	ctx := context.Background()
	open := func(ps []routing.Placement) []bool {
		out := make([]bool, len(ps))
		for i, p := range ps {
			s, _ := e.clients[p.Shard].(redis.Cmdable).HGet(ctx, routingfmt.Keys(e.shards[p.Shard].Keys().Tag(p.Unit)).Own, "state").Result()
			out[i] = s == "open"
		}
		return out
	}
	anyOf := func(b []bool) bool {
		for _, x := range b {
			if x {
				return true
			}
		}
		return false
	}
	go func() {
		defer close(o.done)
		for {
			select {
			case <-o.stop:
				return
			default:
			}
			a1, b, a2 := open(old), open(next), open(old)
			o.reads.Add(1)
			for i := range a1 {
				if a1[i] && a2[i] && anyOf(b) {
					o.both.Add(1)
				}
			}
		}
	}()
	return o
}

// checkSpread requires the spread of tenant under the current table to hold exactly the
// tenant's acknowledged history: every sub-bucket only the records whose keys hash to it,
// with their versions, together every acknowledged record, and every acknowledged op of the
// tenant in the sub-bucket of its key with its version.
func (m *tmodel) checkSpread(t testing.TB, e *env, tenant string) {
	t.Helper()
	ss := e.table().Spreads[tenant]
	require.NotEmpty(t, ss)
	m.mu.Lock()
	defer m.mu.Unlock()
	got := map[string]routing.Record{}
	ops := map[string]string{}
	for j, s := range ss {
		u := routing.SpreadUnit(tenant, uint32(j))
		for f, r := range e.records(s, u) {
			tn, key, ok := routingfmt.SplitRecordField(f)
			require.True(t, ok && tn == tenant, "record %q in %s", f, u)
			require.Equal(t, uint64(j), hashing.Bucket(key, uint64(len(ss))), "record %q is in %s", f, u)
			got[f] = r
		}
		for id, v := range e.ops(s, u) {
			or, err := routingfmt.DecodeOpRecord(v)
			require.NoError(t, err)
			_, key, _ := routingfmt.SplitRecordField(or.Field)
			require.Equal(t, uint64(j), hashing.Bucket(key, uint64(len(ss))), "op %s is in %s", id, u)
			ops[id] = v
		}
	}
	prefix := routingfmt.RecordField(tenant, "")
	want := 0
	for f, r := range m.recs {
		if len(f) >= len(prefix) && f[:len(prefix)] == prefix {
			want++
			require.Equal(t, r, got[f], "record %q of %q", f, tenant)
		}
	}
	require.Equal(t, want, len(got), "records of %q", tenant)
	for id, res := range m.ops {
		if f := m.opf[id]; len(f) < len(prefix) || f[:len(prefix)] != prefix {
			continue
		}
		rec, ok := ops[routing.OpKey(tenant, id)]
		require.True(t, ok, "op %s of %q missing", id, tenant)
		or, err := routingfmt.DecodeOpRecord(rec)
		require.NoError(t, err)
		require.Equal(t, res.Version, or.Version, "op %s version", id)
	}
}

// splitWriters starts writers of tenant (n clients, each on the table of its start until a
// shard refuses it, and a routing Router) and of a neighbour (an overridden tenant on the
// same source shard) until stop is closed; the returned function waits for them and
// reports their errors.
func splitWriters(t *testing.T, e *env, m *tmodel, round int, tenant, neighbour string, stop chan struct{}, stale, nstale *atomic.Int64) func() {
	ctx := testkit.Ctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 2; i++ {
		c := e.client()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- m.writer(ctx, c, tenant, fmt.Sprintf("w%d-%d", round, i), 40, stop, stale)
		}()
	}
	rclients := map[string]routing.ShardClient{}
	for n, c := range e.clients {
		rclients[n] = c
	}
	rt, err := routing.New(e.control, routing.Options{Shards: rclients, Prefix: e.prefix})
	require.NoError(t, err)
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
			key, opID := fmt.Sprintf("r-k%d", i%30), fmt.Sprintf("t%d-router%d-op%d", m.id, round, i)
			op := routing.Put(key, fmt.Sprintf("v%d", i))
			if i%5 == 2 {
				op = routing.Delete(key)
			}
			res, err := rt.Do(ctx, tenant, opID, op)
			if err != nil {
				errs <- fmt.Errorf("router op %s: %w", opID, err)
				return
			}
			m.ack(tenant, key, op, opID, res)
			time.Sleep(m.pace)
		}
	}()
	c := e.client()
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs <- m.writer(ctx, c, neighbour, fmt.Sprintf("n%d", round), 20, stop, nstale)
	}()
	return func() {
		wg.Wait()
		rt.Close()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
}

// An overridden tenant is split over four shards, re-split to eight sub-buckets, then back
// to four, while it keeps writing through clients that hold the table of their start until
// a shard refuses them and through a routing Router, and a neighbour overridden onto the
// same shard keeps writing too. On standalone shards the first driver of each move loses the
// reply of one source's barrier and a fresh coordinator resumes the split. At no instant is
// a unit of the old placement open together with one of the new; the neighbour never meets
// a stale route; after each move the spread holds exactly the tenant's acknowledged
// history, each record in the sub-bucket of its key; the closed sources keep their copies
// until Cleanup.
func TestSplitAndReSplitWhileTheTenantKeepsWriting(t *testing.T) {
	for name, e := range splitEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			fat, neighbour := "split-fat-"+name, "split-neighbour-"+name
			e.override(fat, "a")
			e.override(neighbour, "a")
			m := newTModel()
			m.pace = time.Millisecond
			seeder := e.client()
			m.seed(t, seeder, fat, 400)
			m.seed(t, seeder, neighbour, 30)
			stop := make(chan struct{})
			var stale, nstale atomic.Int64
			wait := splitWriters(t, e, m, 0, fat, neighbour, stop, &stale, &nstale)
			defer func() {
				select {
				case <-stop:
				default:
					close(stop)
					wait()
				}
			}()
			opts := migrate.Options{BatchSize: 100, LeaseTTL: 200 * time.Millisecond}
			for i, to := range [][]string{{"a", "b", "c", "d"}, {"b", "c", "d", "a", "a", "b", "c", "d"}, {"c", "d", "a", "b"}} {
				old := placement(e.table(), fat)
				var next []routing.Placement
				for j, s := range to {
					next = append(next, routing.Placement{Unit: routing.SpreadUnit(fat, uint32(j)), Shard: s})
				}
				obs := e.spreadObserver(old, next)
				id := fmt.Sprintf("%s-split-%d", name, i)
				before, acked := stale.Load(), m.acked()
				co := e.coordinator(opts)
				if name == "standalone" {
					// The first driver loses the reply of the barrier on the last source.
					src := old[len(old)-1].Shard
					inj := faults.New()
					lossy := map[string]migrate.ShardClient{}
					for n, c := range e.clients {
						lossy[n] = c
					}
					addr := e.clients[src].(*redis.Client).Options().Addr
					lc := redis.NewClient(&redis.Options{Addr: addr, Dialer: inj.Dialer(nil), MaxRetries: -1})
					defer lc.Close()
					lossy[src] = lc
					inj.DropReply(faults.Match{Command: "EVALSHA", Arg: ownScriptHash(t)}, 1)
					co1, err := migrate.New(e.control, migrate.Options{Shards: lossy, Prefix: e.prefix, BatchSize: 100, LeaseTTL: 200 * time.Millisecond})
					require.NoError(t, err)
					_, err = co1.Split(ctx, migrate.SplitSpec{ID: id, Tenant: fat, Targets: to})
					require.Error(t, err, "move %d: the barrier's reply was lost", i)
					require.Equal(t, int64(1), inj.Dropped())
				}
				var st migrate.Status
				var err error
				if name == "standalone" {
					st, err = co.Resume(ctx, id)
				} else {
					st, err = co.Split(ctx, migrate.SplitSpec{ID: id, Tenant: fat, Targets: to})
				}
				require.NoError(t, err, "move %d", i)
				require.Equal(t, migrate.OwnedB, st.State)
				require.Equal(t, to, st.SplitTo)
				require.Contains(t, st.String(), "split from")
				require.Positive(t, st.Copied, "the counts are the sums of the sources'")
				tb := e.table()
				require.Equal(t, to, tb.Spreads[fat])
				require.NotContains(t, tb.Overrides, fat)
				require.Equal(t, st.FlipGen, tb.Generation)
				for _, p := range next {
					require.Equal(t, routing.StateOpen, e.own(p.Shard, p.Unit).State, "%s on %s", p.Unit, p.Shard)
				}
				for _, p := range old {
					require.Equal(t, routing.StateClosed, e.own(p.Shard, p.Unit).State, "%s on %s", p.Unit, p.Shard)
				}
				// The writers met the barrier and write on.
				require.Eventually(t, func() bool { return stale.Load() > before }, 30*time.Second, time.Millisecond,
					"move %d: the tenant's writers met the barrier", i)
				require.Eventually(t, func() bool { return m.acked() >= acked+50 }, 30*time.Second, time.Millisecond)
				obs.finish(t)
				unfinished, err := co.Unfinished(ctx)
				require.NoError(t, err)
				require.Empty(t, unfinished)

				// The model check, with the writers paused: stop them, check, start again.
				close(stop)
				wait()
				m.checkSpread(t, e, fat)
				m.check(t, e, "a", routing.TenantUnit(neighbour), neighbour)

				// The rollback window: the closed sources keep their copies until Cleanup.
				kept := 0
				for _, p := range old {
					kept += len(e.records(p.Shard, p.Unit))
				}
				require.Positive(t, kept)
				_, err = co.Cleanup(ctx, id)
				require.ErrorIs(t, err, migrate.ErrGraceNotElapsed)
				cs, err := e.coordinator(migrate.Options{Grace: time.Nanosecond}).Cleanup(ctx, id)
				require.NoError(t, err)
				require.True(t, cs.Cleaned)
				for _, p := range old {
					require.Zero(t, e.dataKeys(p.Shard, p.Unit), "%s on %s is cleaned", p.Unit, p.Shard)
					require.Equal(t, routing.StateClosed, e.own(p.Shard, p.Unit).State)
				}
				m.checkSpread(t, e, fat)

				stop = make(chan struct{})
				wait = splitWriters(t, e, m, i+1, fat, neighbour, stop, &stale, &nstale)
			}
			close(stop)
			wait()
			require.Zero(t, nstale.Load(), "the neighbour never met a stale route")
			m.checkSpread(t, e, fat)
		})
	}
}

// The course-72 trace in the spread form: a seat confirmation of an overridden tenant is
// applied on A and its reply is lost; the tenant is split over four shards; the client
// retries through its stale table with the same op ID: A refuses, the client learns the new
// table, and the sub-bucket of the seat's key returns the original result, applied once.
func TestSplitLostSeatConfirmationReplaysInTheNewSubBucket(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	inj := faults.New()
	addr := e.clients["a"].(*redis.Client).Options().Addr
	lossy := redis.NewClient(&redis.Options{Addr: addr, Dialer: inj.Dialer(nil), MaxRetries: -1})
	t.Cleanup(func() { _ = lossy.Close() })
	ca, err := routing.NewShard("a", lossy, routing.ShardOptions{Prefix: e.prefix})
	require.NoError(t, err)
	ctx := testkit.Ctx(t)
	tenant := "course-72"
	e.override(tenant, "a")
	route := e.table()
	tu := routing.TenantUnit(tenant)

	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "confirm-72-alice"}, 1)
	_, err = ca.Exec(ctx, tu, route.Generation, tenant, "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.Error(t, err, "the reply was lost")
	require.Equal(t, int64(1), inj.Dropped())

	st, err := e.coordinator(migrate.Options{}).Split(ctx, migrate.SplitSpec{Tenant: tenant, Targets: []string{"b", "c", "d", "a"}})
	require.NoError(t, err)

	_, err = ca.Exec(ctx, tu, route.Generation, tenant, "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.ErrorIs(t, err, routing.ErrStaleRoute, "the closed override refuses the stale route")
	cl := &client{e: e, t: route}
	res, stale, err := cl.tdo(ctx, tenant, "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.NoError(t, err)
	require.Equal(t, 1, stale)
	require.Equal(t, routing.Result{Applied: true, Version: 1, Replayed: true}, res, "the original confirmation")
	require.Equal(t, st.FlipGen, cl.table().Generation)
	sub := hashing.Bucket("seat:17", 4)
	u := routing.SpreadUnit(tenant, uint32(sub))
	require.Equal(t, map[string]routing.Record{routingfmt.RecordField(tenant, "seat:17"): {Version: 1, Value: "alice"}},
		e.records(st.SplitTo[sub], u), "applied once, in the seat's sub-bucket")
	_, _, err = cl.tdo(ctx, tenant, "confirm-72-bob", routing.PutIf("seat:17", "bob", 0))
	require.ErrorIs(t, err, routing.ErrVersionMismatch, "nobody takes the seat again")
}

// Bad split requests are refused with an ErrInvalid error that names the problem, and change
// nothing: no journal record, no lock, the same table. A tenant without records splits all
// the same, and two sub-buckets may share a shard.
func TestSplitBadInputIsRefusedAndChangesNothing(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	ctx := testkit.Ctx(t)
	e.override("over", "a")
	nt := e.table().Next()
	nt.SetSpread("spread", []string{"a", "b", "c", "d"})
	require.NoError(t, e.store.Publish(ctx, nt))
	for j, s := range []string{"a", "b", "c", "d"} {
		_, err := e.shards[s].Transition(ctx, routing.SpreadUnit("spread", uint32(j)), routing.Ownership{},
			routing.Ownership{Generation: nt.Generation, State: routing.StateOpen})
		require.NoError(t, err)
	}
	tooMany := make([]string, routing.MaxSpread+1)
	for i := range tooMany {
		tooMany[i] = "b"
	}
	co := e.coordinator(migrate.Options{})
	before := e.table()
	for _, tc := range []struct {
		spec migrate.SplitSpec
		want string
	}{
		{migrate.SplitSpec{Tenant: "over"}, "Targets must name 1..1024 shards"},
		{migrate.SplitSpec{Tenant: "over", Targets: []string{"b"}}, "one unit already"},
		{migrate.SplitSpec{Tenant: "over", Targets: tooMany}, "got 1025"},
		{migrate.SplitSpec{Tenant: "over", Targets: []string{"b", "zz"}}, `Targets[1]: unknown shard "zz"`},
		{migrate.SplitSpec{Tenant: "", Targets: []string{"b", "c"}}, "tenant"},
		{migrate.SplitSpec{Tenant: "bad\xff", Targets: []string{"b", "c"}}, "UTF-8"},
		{migrate.SplitSpec{Tenant: "in-a-bucket", Targets: []string{"b", "c"}}, "carve it out first"},
		{migrate.SplitSpec{Tenant: "spread", Targets: []string{"b", "c", "d", "a"}}, "must change the width"},
		{migrate.SplitSpec{Tenant: "spread", Targets: []string{"b", "b", "c", "d", "a", "b"}}, `Targets[1] is "b", the shard of the old sub-bucket 1`},
		{migrate.SplitSpec{ID: "x{y}", Tenant: "over", Targets: []string{"b", "c"}}, "braces"},
	} {
		_, err := co.StartSplit(ctx, tc.spec)
		require.ErrorIs(t, err, migrate.ErrInvalid, "%+v", tc.spec)
		require.ErrorContains(t, err, tc.want)
	}
	require.Equal(t, before, e.table())
	unfinished, err := co.Unfinished(ctx)
	require.NoError(t, err)
	require.Empty(t, unfinished)
	// The locks are free: a move of the override starts (and is cancelled).
	st, err := co.Start(ctx, migrate.Spec{Unit: routing.TenantUnit("over"), Target: "b"})
	require.NoError(t, err)
	_, err = co.Cancel(ctx, st.ID)
	require.NoError(t, err)

	// An empty tenant splits, two sub-buckets on one shard.
	st, err = co.Split(ctx, migrate.SplitSpec{Tenant: "over", Targets: []string{"b", "b", "c"}})
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	require.Equal(t, []string{"b", "b", "c"}, e.table().Spreads["over"])
	for j, s := range st.SplitTo {
		require.Equal(t, routing.StateOpen, e.own(s, routing.SpreadUnit("over", uint32(j))).State)
	}
	// A retry of the same start (a lost reply) returns the same migration; another use of
	// its ID is refused.
	again, err := co.StartSplit(ctx, migrate.SplitSpec{ID: st.ID, Tenant: "over", Targets: []string{"b", "b", "c"}})
	require.NoError(t, err)
	require.Equal(t, st.ID, again.ID)
	_, err = co.StartSplit(ctx, migrate.SplitSpec{ID: st.ID, Tenant: "over", Targets: []string{"c", "d"}})
	require.ErrorIs(t, err, migrate.ErrInvalid)
}

// A split cancelled while it copies, and one that aborts at the barrier because the copy
// differs from its sources, leave the tenant where it was: the override (or the spread)
// open, the targets empty and refusing, the locks free; the abort names the differing key.
func TestSplitCancelAndAbortLeaveTheTenantWhereItWas(t *testing.T) {
	e := splitEnvs(t)["standalone"]
	ctx := testkit.Ctx(t)
	tenant := "split-cancel"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 300)
	targets := []string{"b", "c", "d", "a"}
	requireWhereItWas := func(id string) {
		t.Helper()
		require.Equal(t, "a", e.table().Overrides[tenant])
		require.NotContains(t, e.table().Spreads, tenant)
		require.Equal(t, routing.StateOpen, e.own("a", routing.TenantUnit(tenant)).State)
		for j, s := range targets {
			u := routing.SpreadUnit(tenant, uint32(j))
			require.Zero(t, e.dataKeys(s, u), "%s on %s holds nothing", u, s)
			require.Equal(t, routing.State("cancelled"), e.own(s, u).State)
		}
		m.check(t, e, "a", routing.TenantUnit(tenant), tenant)
		unfinished, err := e.coordinator(migrate.Options{}).Unfinished(ctx)
		require.NoError(t, err)
		require.Empty(t, unfinished, id)
	}

	// Cancelled by an operator while the snapshot is copied: the driver is fenced.
	canceller := e.coordinator(migrate.Options{})
	var cancelled atomic.Bool
	co := e.coordinator(migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
		if s.State == migrate.Copying && cancelled.CompareAndSwap(false, true) {
			_, err := canceller.Cancel(context.Background(), s.ID)
			require.NoError(t, err)
		}
	}})
	st, err := co.Split(ctx, migrate.SplitSpec{ID: "cancel", Tenant: tenant, Targets: targets})
	require.Error(t, err)
	require.True(t, cancelled.Load())
	st, err = co.Status(ctx, "cancel")
	require.NoError(t, err)
	require.Equal(t, migrate.Cancelled, st.State)
	requireWhereItWas("cancel")
	// The tenant writes on its override.
	m.seed(t, e.client(), tenant, 20)

	// A copy that differs from its sources: a record no source holds is slipped into a
	// target; the verification under the barrier finds it and the split aborts, reopening
	// the override.
	bogus := routingfmt.RecordField(tenant, "bogus")
	co = e.coordinator(migrate.Options{})
	var slipped atomic.Bool
	migrate.SetBeforeApply(co, func(ctx context.Context, id string, items []migrate.Item, apply func([]migrate.Item) error) {
		if slipped.CompareAndSwap(false, true) {
			require.NoError(t, apply([]migrate.Item{{Record: true, Field: bogus, Value: "1:l:boo"}}))
		}
	})
	_, err = co.Split(ctx, migrate.SplitSpec{ID: "abort", Tenant: tenant, Targets: targets})
	require.ErrorIs(t, err, migrate.ErrAborted)
	require.ErrorIs(t, err, migrate.ErrVerify)
	require.ErrorContains(t, err, bogus)
	requireWhereItWas("abort")
	// The split runs through afterwards.
	st, err = e.coordinator(migrate.Options{}).Split(ctx, migrate.SplitSpec{ID: "after", Tenant: tenant, Targets: targets})
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	m.checkSpread(t, e, tenant)
}
