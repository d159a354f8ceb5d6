package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
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

// routeTenant routes a tenant by table t the way routing's Router does for a tenant that is
// not spread: its override, else its hash bucket.
func routeTenant(t *routing.Table, tenant string) (routing.Unit, string) {
	if o := t.Overrides[tenant]; o != "" {
		return routing.TenantUnit(tenant), o
	}
	b := routing.BucketOf(tenant, t.Buckets)
	return routing.BucketUnit(b), t.BucketOwner(b)
}

// tdo executes op for tenant through the client's table; on ErrStaleRoute it reloads the
// table (polling while the flip is in progress) and retries with the same op ID. It returns
// how many stale routes it met.
func (c *client) tdo(ctx context.Context, tenant, opID string, op routing.Op) (routing.Result, int, error) {
	stale := 0
	for {
		t := c.table()
		u, owner := routeKey(t, tenant, op.Key)
		res, err := c.e.shards[owner].Exec(ctx, u, t.Generation, tenant, opID, op)
		if !errors.Is(err, routing.ErrStaleRoute) {
			return res, stale, err
		}
		stale++
		c.stale.Add(1)
		if err := c.refresh(ctx, t.Generation); err != nil {
			return res, stale, err
		}
	}
}

// tmodel is the acknowledged history of several tenants: per record field (which names the
// tenant), the last acknowledged write, and every acknowledged op's result.
type tmodel struct {
	id   int64
	mu   sync.Mutex
	recs map[string]routing.Record
	ops  map[string]routing.Result
	opf  map[string]string // op ID -> record field
	pace time.Duration     // pause between a writer's writes (0: none)
}

// acked returns how many operations writers have had acknowledged.
func (m *tmodel) acked() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ops)
}

func newTModel() *tmodel {
	return &tmodel{id: models.Add(1), recs: map[string]routing.Record{}, ops: map[string]routing.Result{},
		opf: map[string]string{}}
}

func (m *tmodel) ack(tenant, key string, op routing.Op, opID string, res routing.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := routingfmt.RecordField(tenant, key)
	m.ops[opID], m.opf[opID] = res, f
	if !res.Applied {
		return
	}
	if op.Kind == routing.OpDelete {
		m.recs[f] = routing.Record{Version: res.Version, Deleted: true}
	} else {
		m.recs[f] = routing.Record{Version: res.Version, Value: op.Value}
	}
}

// writer writes puts and deletes of tenant's keys through c until stop is closed, and
// counts the stale routes it met.
func (m *tmodel) writer(ctx context.Context, c *client, tenant, name string, keys int, stop <-chan struct{}, stale *atomic.Int64) error {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		key := fmt.Sprintf("%s-k%d", name, i%keys)
		opID := fmt.Sprintf("t%d-%s-op%d", m.id, name, i)
		op := routing.Put(key, fmt.Sprintf("v%d", i))
		if i%7 == 3 {
			op = routing.Delete(key)
		}
		res, n, err := c.tdo(ctx, tenant, opID, op)
		stale.Add(int64(n))
		if err != nil {
			return fmt.Errorf("writer %s op %s: %w", name, opID, err)
		}
		m.ack(tenant, key, op, opID, res)
		if m.pace > 0 {
			time.Sleep(m.pace)
		}
	}
}

func (m *tmodel) seed(t testing.TB, c *client, tenant string, n int) {
	t.Helper()
	ctx := testkit.Ctx(t)
	for i := 0; i < n; i++ {
		key, opID := fmt.Sprintf("seed-%d", i), fmt.Sprintf("t%d-%s-seed-%d", m.id, tenant, i)
		op := routing.Put(key, fmt.Sprintf("s%d", i))
		if i%5 == 4 {
			// A tombstone: delete the key just written.
			res, _, err := c.tdo(ctx, tenant, opID+"-p", op)
			require.NoError(t, err)
			m.ack(tenant, key, op, opID+"-p", res)
			op = routing.Delete(key)
		}
		res, _, err := c.tdo(ctx, tenant, opID, op)
		require.NoError(t, err)
		m.ack(tenant, key, op, opID, res)
	}
}

// check requires unit u on shard name to hold exactly tenant's acknowledged records (each
// with its version), and every acknowledged op of the tenant with its version.
func (m *tmodel) check(t testing.TB, e *env, name string, u routing.Unit, tenant string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := routingfmt.RecordField(tenant, "")
	got := map[string]routing.Record{}
	for f, r := range e.records(name, u) {
		if len(f) >= len(prefix) && f[:len(prefix)] == prefix {
			got[f] = r
		}
	}
	want := 0
	for f, r := range m.recs {
		if len(f) >= len(prefix) && f[:len(prefix)] == prefix {
			want++
			require.Equal(t, r, got[f], "record %q of %q on %s", f, tenant, name)
		}
	}
	require.Equal(t, want, len(got), "records of %q on %s", tenant, name)
	ops := e.ops(name, u)
	for id, res := range m.ops {
		if f := m.opf[id]; len(f) < len(prefix) || f[:len(prefix)] != prefix {
			continue
		}
		rec, ok := ops[routing.OpKey(tenant, id)]
		require.True(t, ok, "op %s of %q missing on %s", id, tenant, name)
		or, err := routingfmt.DecodeOpRecord(rec)
		require.NoError(t, err)
		require.Equal(t, res.Version, or.Version, "op %s version on %s", id, name)
	}
}

// sameBucket returns n tenants (named after base) that hash to the same bucket as tenant.
func sameBucket(tenant, base string, n int) []string {
	b := routing.BucketOf(tenant, testBuckets)
	var out []string
	for i := 0; len(out) < n; i++ {
		if c := fmt.Sprintf("%s%d", base, i); routing.BucketOf(c, testBuckets) == b && c != tenant {
			out = append(out, c)
		}
	}
	return out
}

// tenantObserver watches whether tenant is writable at its bucket on x (bucket open, tenant
// unmarked) and at its override unit on y (open), and counts instants when both were,
// reading x, y, x as env.observe does.
func (e *env) tenantObserver(tenant string, x, y string) *observer {
	o := &observer{stop: make(chan struct{}), done: make(chan struct{})}
	bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
	kx, ky := routingfmt.Keys(e.shards[x].Keys().Tag(bu)).Own, routingfmt.Keys(e.shards[y].Keys().Tag(routing.TenantUnit(tenant))).Own
	cx, cy := e.clients[x].(redis.Cmdable), e.clients[y].(redis.Cmdable)
	ctx := context.Background()
	openX := func() bool {
		v, _ := cx.HMGet(ctx, kx, "state", "x:"+tenant).Result()
		return len(v) == 2 && v[0] == "open" && v[1] == nil
	}
	openY := func() bool { s, _ := cy.HGet(ctx, ky, "state").Result(); return s == "open" }
	go func() {
		defer close(o.done)
		for {
			select {
			case <-o.stop:
				return
			default:
			}
			a1, b, a2, b2 := openX(), openY(), openX(), openY()
			o.reads.Add(1)
			if a1 && b && a2 || b && a2 && b2 {
				o.both.Add(1)
			}
		}
	}()
	return o
}

// carveEnvs returns a standalone env (control, a, b on three servers) and a cluster env
// (control and shard a on the shared cluster, shard b standalone).
func carveEnvs(t *testing.T) map[string]*env {
	std := newEnv(t, routing.ShardOptions{})
	cl := celebritytest.SharedCluster(t)
	b := celebritytest.Standalone(t)
	clu := newEnvOver(t, cl.Client(t), map[string]migrate.ShardClient{"a": cl.Client(t), "b": b.Client(t)}, routing.ShardOptions{})
	return map[string]*env{"standalone": std, "cluster": clu}
}

// One fat tenant leaves its shared bucket for a unit of its own on the other shard while it
// and three neighbours in the bucket keep writing through clients on the old table. The
// driver's reply to the barrier is lost; a fresh coordinator resumes. At every instant at
// most one shard is writable for the tenant; the neighbours never meet a stale route; the
// tenant's data on the target equals its acknowledged history; the bucket keeps the closed
// copy until Cleanup, which removes the tenant's items only.
func TestCarveOutMovesOneTenantWhileItsBucketKeepsWriting(t *testing.T) {
	for name, e := range carveEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			fat := "fat-" + name
			others := sameBucket(fat, "small-"+name+"-", 3)
			bu := routing.BucketUnit(routing.BucketOf(fat, testBuckets))
			src := e.openOwner(bu)
			dst := other(src)
			m := newTModel()
			seeder := e.client()
			m.seed(t, seeder, fat, 400)
			for _, o := range others {
				m.seed(t, seeder, o, 30)
			}

			stop := make(chan struct{})
			var fatStale, otherStale atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for i := 0; i < 2; i++ {
				c := e.client() // each holds the old table until a shard refuses it
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- m.writer(ctx, c, fat, fmt.Sprintf("fat%d", i), 40, stop, &fatStale)
				}()
			}
			// A router of package routing writes the fat tenant too (pub/sub and poll).
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
			obs := e.tenantObserver(fat, src, dst)

			// The first driver loses the reply of the barrier script and stops there.
			inj := faults.New()
			lossy := map[string]migrate.ShardClient{}
			for n := range e.clients {
				lossy[n] = e.clients[n]
			}
			if name == "standalone" {
				srvAddr := e.clients[src].(*redis.Client).Options().Addr
				lossy[src] = redis.NewClient(&redis.Options{Addr: srvAddr, Dialer: inj.Dialer(nil), MaxRetries: -1})
				t.Cleanup(func() { _ = lossy[src].(*redis.Client).Close() })
				inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "close"}, 1)
			}
			co1, err := migrate.New(e.control, migrate.Options{Shards: lossy, Prefix: e.prefix, BatchSize: 100, LeaseTTL: 200 * time.Millisecond})
			require.NoError(t, err)
			st, err := co1.Carve(ctx, migrate.CarveSpec{ID: name + "-carve", Tenant: fat, Target: dst})
			if name == "standalone" {
				require.Error(t, err, "the barrier's reply was lost")
				require.Equal(t, int64(1), inj.Dropped())
				co2 := e.coordinator(migrate.Options{BatchSize: 100, LeaseTTL: 200 * time.Millisecond})
				st, err = co2.Resume(ctx, name+"-carve")
			}
			require.NoError(t, err)
			require.Equal(t, migrate.OwnedB, st.State)
			require.Equal(t, bu, st.From)
			require.Equal(t, routing.TenantUnit(fat), st.Unit)

			// Let the writers acknowledge more writes on the new table, then stop.
			require.Eventually(t, func() bool { return fatStale.Load() > 0 }, 30*time.Second, time.Millisecond,
				"the fat tenant's writers met the barrier")
			after := m.acked()
			require.Eventually(t, func() bool { return m.acked() >= after+20 }, 30*time.Second, time.Millisecond,
				"writes go on after the flip")
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			obs.finish(t)
			require.Zero(t, otherStale.Load(), "the bucket's other tenants never met a stale route")

			tb := e.table()
			require.Equal(t, dst, tb.Overrides[fat])
			require.Equal(t, st.FlipGen, tb.Generation)
			require.Equal(t, routing.StateOpen, e.own(dst, routing.TenantUnit(fat)).State)
			require.Equal(t, routing.Ownership{Generation: 1, State: routing.StateOpen}, e.own(src, bu), "the bucket stays open")
			m.check(t, e, dst, routing.TenantUnit(fat), fat)
			for _, o := range others {
				m.check(t, e, src, bu, o)
			}
			require.Equal(t, st.Digest.Records+st.Digest.Tombstones, int64(len(e.records(dst, routing.TenantUnit(fat)))))

			// The rollback window: the bucket keeps the tenant's closed copy, refused to
			// routed reads.
			_, _, err = e.shards[src].Get(ctx, bu, tb.Generation, fat, "seed-0")
			require.ErrorIs(t, err, routing.ErrStaleRoute)
			require.NotEmpty(t, tenantFields(e.records(src, bu), fat))
			_, err = co1.Cleanup(ctx, st.ID)
			require.ErrorIs(t, err, migrate.ErrGraceNotElapsed)
			co3 := e.coordinator(migrate.Options{Grace: time.Millisecond, BatchSize: 7})
			time.Sleep(5 * time.Millisecond)
			cst, err := co3.Cleanup(ctx, st.ID)
			require.NoError(t, err)
			require.True(t, cst.Cleaned)
			require.Empty(t, tenantFields(e.records(src, bu), fat), "the tenant's copy is gone from the bucket")
			for id, v := range e.ops(src, bu) {
				or, err := routingfmt.DecodeOpRecord(v)
				require.NoError(t, err)
				require.NotContains(t, tenantFields(map[string]routing.Record{or.Field: {}}, fat), or.Field, "op %s", id)
			}
			for _, o := range others {
				m.check(t, e, src, bu, o)
			}
			m.check(t, e, dst, routing.TenantUnit(fat), fat)
		})
	}
}

func tenantFields(recs map[string]routing.Record, tenant string) []string {
	var out []string
	for f := range recs {
		if tt, _, ok := routingfmt.SplitRecordField(f); ok && tt == tenant {
			out = append(out, f)
		}
	}
	return out
}

// The course-72 trace in the tenant form: a seat confirmation of a tenant in a shared bucket
// is applied on A and its reply is lost; the tenant is carved out to B; the client retries
// through its stale table with the same op ID: A refuses, the client learns the new table,
// and B returns the original result, applied once.
func TestCarveOutLostSeatConfirmationReplaysOnTheNewOwner(t *testing.T) {
	srv := celebritytest.Shards(t, 3)
	inj := faults.New()
	lossy := srv[1].Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil); o.MaxRetries = -1 })
	e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": srv[2].Client(t)}, routing.ShardOptions{})
	ca, err := routing.NewShard("a", lossy, routing.ShardOptions{Prefix: e.prefix})
	require.NoError(t, err)
	ctx := testkit.Ctx(t)
	tenant := "course-72"
	bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
	require.Equal(t, "a", e.openOwner(bu))
	route := e.table()
	neighbour := sameBucket(tenant, "course-", 1)[0]
	_, err = e.shards["a"].Exec(ctx, bu, route.Generation, neighbour, "n-1", routing.Put("seat:17", "carol"))
	require.NoError(t, err)

	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "confirm-72-alice"}, 1)
	_, err = ca.Exec(ctx, bu, route.Generation, tenant, "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.Error(t, err, "the reply was lost")
	require.Equal(t, int64(1), inj.Dropped())

	st, err := e.coordinator(migrate.Options{}).Carve(ctx, migrate.CarveSpec{Tenant: tenant, Target: "b"})
	require.NoError(t, err)

	// Through the stale route: A refuses the tenant only.
	_, err = ca.Exec(ctx, bu, route.Generation, tenant, "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.ErrorIs(t, err, routing.ErrStaleRoute)
	_, err = ca.Exec(ctx, bu, route.Generation, neighbour, "n-2", routing.Put("seat:18", "dave"))
	require.NoError(t, err, "the neighbour in the bucket still writes on the old table")
	cl := &client{e: e, t: route}
	res, stale, err := cl.tdo(ctx, tenant, "confirm-72-alice", routing.PutIf("seat:17", "alice", 0))
	require.NoError(t, err)
	require.Equal(t, 1, stale)
	require.Equal(t, routing.Result{Applied: true, Version: 1, Replayed: true}, res, "the original confirmation")
	require.Equal(t, st.FlipGen, cl.table().Generation)
	tu := routing.TenantUnit(tenant)
	recs := e.records("b", tu)
	require.Equal(t, map[string]routing.Record{routingfmt.RecordField(tenant, "seat:17"): {Version: 1, Value: "alice"}}, recs,
		"applied once, and nothing of the neighbour travelled")
	_, _, err = cl.tdo(ctx, tenant, "confirm-72-bob", routing.PutIf("seat:17", "bob", 0))
	require.ErrorIs(t, err, routing.ErrVersionMismatch, "nobody takes the seat again")
}

// Bad carve-out requests are refused with a clear error and change nothing; a tenant
// without records is carved out all the same.
func TestCarveOutBadInputIsRefusedAndAnEmptyTenantWorks(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	nt := e.table().Next()
	nt.SetOverride("over", "a")
	nt.SetSpread("wide", []string{"a", "b"})
	require.NoError(t, e.store.Publish(ctx, nt))
	empty := "empty"
	bu := routing.BucketUnit(routing.BucketOf(empty, testBuckets))
	src := e.openOwner(bu)
	co := e.coordinator(migrate.Options{})
	for _, tc := range []struct {
		name string
		spec migrate.CarveSpec
		want error
	}{
		{"empty tenant", migrate.CarveSpec{Tenant: "", Target: "b"}, migrate.ErrInvalid},
		{"tenant not UTF-8", migrate.CarveSpec{Tenant: "a\xff", Target: "b"}, migrate.ErrInvalid},
		{"already overridden", migrate.CarveSpec{Tenant: "over", Target: "b"}, migrate.ErrInvalid},
		{"spread", migrate.CarveSpec{Tenant: "wide", Target: "b"}, migrate.ErrInvalid},
		{"target is source", migrate.CarveSpec{Tenant: empty, Target: src}, migrate.ErrInvalid},
		{"unknown shard", migrate.CarveSpec{Tenant: empty, Target: "zz"}, migrate.ErrInvalid},
		{"wrong source", migrate.CarveSpec{Tenant: empty, Source: other(src), Target: other(src)}, migrate.ErrInvalid},
		{"braces in id", migrate.CarveSpec{ID: "x{y}", Tenant: empty, Target: other(src)}, migrate.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := co.Carve(ctx, tc.spec)
			require.ErrorIs(t, err, tc.want)
			t.Log(err)
		})
	}
	require.Equal(t, uint64(2), e.table().Generation, "nothing was published")
	_, moved, err := e.shards[src].Ownership(ctx, bu)
	require.NoError(t, err)
	require.Empty(t, moved, "nothing was marked")
	unfinished, err := co.Unfinished(ctx)
	require.NoError(t, err)
	require.Empty(t, unfinished)

	st, err := co.Carve(ctx, migrate.CarveSpec{ID: "empty", Tenant: empty, Target: other(src)})
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	require.Zero(t, st.Copied)
	require.Equal(t, other(src), e.table().Overrides[empty])
	res, err := e.shards[other(src)].Exec(ctx, routing.TenantUnit(empty), e.table().Generation, empty, "e-1", routing.Put("k", "v"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Version)
	_, err = co.Carve(ctx, migrate.CarveSpec{Tenant: empty, Target: src})
	require.ErrorIs(t, err, migrate.ErrInvalid, "an overridden tenant is moved with Migrate")
	again, err := co.StartCarve(ctx, migrate.CarveSpec{ID: "empty", Tenant: empty, Target: other(src)})
	require.NoError(t, err, "a retry of the start finds the record")
	require.Equal(t, migrate.OwnedB, again.State)
}

// A carve-out cancelled while it copies, and one that aborts after its barrier (a protocol
// conflict on the target), give the tenant back to its bucket: writable there on the old
// table, nothing left on the target, no claim, no lock.
func TestCarveOutCancelAndAbortGiveTheTenantBack(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	tenant := "back"
	bu := routing.BucketUnit(routing.BucketOf(tenant, testBuckets))
	src := e.openOwner(bu)
	dst := other(src)
	tu := routing.TenantUnit(tenant)
	m := newTModel()
	cl := e.client()
	m.seed(t, cl, tenant, 200)

	// An operator cancels while the driver copies.
	var cancelled migrate.Status
	var cancelErr error
	co := e.coordinator(migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
		if s.State == migrate.Copying && s.Copied > 0 && cancelled.ID == "" {
			cancelled, cancelErr = e.coordinator(migrate.Options{}).Cancel(context.Background(), s.ID)
		}
	}})
	st, err := co.Carve(ctx, migrate.CarveSpec{ID: "c1", Tenant: tenant, Target: dst})
	require.NoError(t, cancelErr)
	require.Equal(t, migrate.Cancelled, cancelled.State)
	require.ErrorIs(t, err, migrate.ErrCancelled)
	require.Equal(t, migrate.Cancelled, st.State)
	requireGivenBack := func() {
		t.Helper()
		require.Empty(t, e.table().Overrides)
		require.Zero(t, e.dataKeys(dst, tu), "the target holds nothing")
		require.NotEqual(t, routing.StateOpen, e.own(dst, tu).State)
		_, moved, err := e.shards[src].Ownership(ctx, bu)
		require.NoError(t, err)
		require.Empty(t, moved)
		claims, err := co.Claims(ctx, tu)
		require.NoError(t, err)
		require.Empty(t, claims)
		unfinished, err := co.Unfinished(ctx)
		require.NoError(t, err)
		require.Empty(t, unfinished)
		op := routing.Put("after", "x")
		id := fmt.Sprintf("after-%d", time.Now().UnixNano())
		res, stale, err := cl.tdo(ctx, tenant, id, op)
		require.NoError(t, err)
		require.Zero(t, stale)
		m.ack(tenant, "after", op, id, res)
		m.check(t, e, src, bu, tenant)
	}
	requireGivenBack()

	// Abort under the barrier: the driver stops right after closing the tenant, the target's
	// copy is tampered with, and the driver resumed from another process finds the
	// difference in its full verification, aborts, and gives the tenant back.
	dctx, stopDriver := context.WithCancel(ctx)
	defer stopDriver()
	victim := routingfmt.RecordField(tenant, "seed-1")
	var tampered atomic.Bool
	co2 := e.coordinator(migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
		if s.State == migrate.ClosedA && s.Barrier != "" && tampered.CompareAndSwap(false, true) {
			k := routingfmt.Keys(e.shards[dst].Keys().Tag(tu))
			require.NoError(t, e.clients[dst].(redis.Cmdable).HSet(context.Background(), k.Records, victim, "999:l:evil").Err())
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
	_, err = co2.Carve(dctx, migrate.CarveSpec{ID: "c2", Tenant: tenant, Target: dst})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, tampered.Load())
	_, moved, err := e.shards[src].Ownership(ctx, bu)
	require.NoError(t, err)
	require.Contains(t, moved, tenant, "the tenant is closed in its bucket")
	st, err = e.coordinator(migrate.Options{}).Resume(ctx, "c2")
	require.ErrorIs(t, err, migrate.ErrAborted)
	var ve *migrate.VerifyError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []string{victim}, ve.Differ, "the error names the differing key")
	require.Equal(t, migrate.Aborted, st.State)
	close(stopW)
	require.NoError(t, <-done)
	requireGivenBack()
}

// Carve-outs driven by real driver processes, standalone and cluster shards, while every
// tenant of the bucket keeps writing through clients on old tables: a driver SIGKILLed at
// each state (and right after the barrier script, before the journal knew) is resumed by a
// new process; a driver stopped (SIGSTOP) in catch-up or just before publishing is taken
// over, and once continued it is fenced and publishes nothing. After every round the tenant
// has one open owner, the one the table names; at the end every carved tenant's data on its
// new shard equals its acknowledged history and the neighbour that stayed never met a stale
// route.
func TestCarveOutDriverProcessesKilledOrStoppedAtEveryState(t *testing.T) {
	celebritytest.Long(t)
	for name, pe := range newProcEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			type round struct{ how, at, arg string }
			k := 0 // the deployment's share of the rounds in quick mode
			if name == "cluster" {
				k = 1
			}
			var rounds []round
			for i, rd := range []round{
				{"killed", "", "prepare"},
				{"killed", string(migrate.Copying), ""},
				{"killed", string(migrate.CatchingUp), ""},
				{"killed", string(migrate.ClosedA), ""},
				{"killed", "", "barrier"},
				{"killed", string(migrate.ReadyB), ""},
				{"stopped", string(migrate.CatchingUp), ""},
				{"stopped", "", routing.Keys{Prefix: pe.prefix}.Table()},
			} {
				// Quick mode runs each round on one of the two deployments, alternating.
				if celebritytest.Spread(i, k, 2) {
					rounds = append(rounds, rd)
				}
			}
			t.Logf("rounds %v (%s=1 runs all eight on both deployments)", rounds, celebritytest.FullEnv)
			neighbour := "proc-stay-" + name
			tenants := sameBucket(neighbour, "proc-fat-"+name+"-", len(rounds))
			bu := routing.BucketUnit(routing.BucketOf(neighbour, testBuckets))
			src := pe.openOwner(bu)
			dst := other(src)
			m := newTModel()
			// Ten writers paced at 1 ms write through every round without saturating a loaded
			// server: flat out, a driver process could not reach its stop point within 90 s.
			m.pace = time.Millisecond
			seeder := pe.client()
			for _, tn := range append([]string{neighbour}, tenants...) {
				m.seed(t, seeder, tn, 60)
			}
			stop := make(chan struct{})
			var carvedStale, stayStale atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, len(tenants)+1)
			for i, tn := range append([]string{neighbour}, tenants...) {
				c, counter := pe.client(), &carvedStale
				if i == 0 {
					counter = &stayStale
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- m.writer(ctx, c, tn, fmt.Sprintf("w%d", i), 15, stop, counter)
				}()
			}
			co := pe.coordinator(migrate.Options{})
			for i, rd := range rounds {
				tn := tenants[i]
				tu := routing.TenantUnit(tn)
				id := fmt.Sprintf("%s-carve-%d", name, i)
				common := []string{"-id", id, "-carve", tn, "-target", dst}
				args := common
				if rd.at != "" {
					args = append(args, "-stop-at-state", rd.at)
				} else {
					args = append(args, "-stop-before-arg", rd.arg)
				}
				p1 := pe.start(t, args...)
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
					st, _ := co.Status(ctx, id)
					require.True(t, r1.Fenced, "round %d: the first driver is fenced: %+v; journal %+v", i, r1, st)
					require.Equal(t, gen, pe.table().Generation, "the fenced driver published nothing")
				}
				require.Equal(t, dst, pe.table().Overrides[tn], "round %d", i)
				require.Equal(t, routing.StateOpen, pe.own(dst, tu).State)
				_, moved, err := pe.shards[src].Ownership(ctx, bu)
				require.NoError(t, err)
				require.Contains(t, moved, tn, "round %d: the bucket refuses the tenant", i)
				require.Equal(t, routing.Ownership{Generation: 1, State: routing.StateOpen}, pe.own(src, bu))
				claims, err := co.Claims(ctx, tu)
				require.NoError(t, err)
				require.Empty(t, claims)
				unfinished, err := co.Unfinished(ctx)
				require.NoError(t, err)
				require.Empty(t, unfinished)
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Zero(t, stayStale.Load(), "the neighbour that stayed never met a stale route")
			require.Positive(t, carvedStale.Load())
			m.check(t, pe.env, src, bu, neighbour)
			for _, tn := range tenants {
				m.check(t, pe.env, dst, routing.TenantUnit(tn), tn)
			}
		})
	}
}

// A carve-out whose driver loses the reply of one command (of each script in turn: the
// takeover, the target's claim, a journal step, a probe of the bucket, a copy batch, the
// barrier, the opening of the target, the table's publication) is resumed by the same
// coordinator and finishes, while every tenant of the bucket keeps writing; standalone and
// cluster shards, every client of the coordinator lossy. The tenants carved out hold exactly
// their acknowledged history on the target; the neighbour that stayed, in the bucket.
func TestCarveOutSurvivesALostReplyOfEachScript(t *testing.T) {
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
			lossyStd := func(addr string) *redis.Client {
				c := redis.NewClient(&redis.Options{Addr: addr, Dialer: inj.Dialer(nil), MaxRetries: -1})
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			if name == "standalone" {
				e = newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": srv[2].Client(t)}, routing.ShardOptions{})
				control = lossyStd(srv[0].Addr())
				lossy = map[string]migrate.ShardClient{"a": lossyStd(srv[1].Addr()), "b": lossyStd(srv[2].Addr())}
			} else {
				e = newEnvOver(t, cl.Client(t), map[string]migrate.ShardClient{"a": cl.Client(t), "b": sb.Client(t)}, routing.ShardOptions{})
				lc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Dialer: inj.Dialer(nil), MaxRetries: -1, MaxRedirects: -1})
				t.Cleanup(func() { _ = lc.Close() })
				control = lc
				lossy = map[string]migrate.ShardClient{"a": lc, "b": lossyStd(sb.Addr())}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			cases := []struct{ what, arg string }{
				{"none", ""},
				{"takeover", h["acquire"]},
				{"claim", h["prepare"]},
				{"journal step", h["step"]},
				{"probe", h["probe"]},
				{"copy batch", h["apply"]},
				{"barrier", h["carve"]},
				{"open target", "importing"},
				{"publish", `"overrides":{`},
			}
			stay := "lost-stay-" + name
			tenants := sameBucket(stay, "lost-fat-"+name+"-", len(cases))
			bu := routing.BucketUnit(routing.BucketOf(stay, testBuckets))
			src := e.openOwner(bu)
			dst := other(src)
			m := newTModel()
			m.pace = 2 * time.Millisecond
			seeder := e.client()
			for _, tn := range append([]string{stay}, tenants...) {
				m.seed(t, seeder, tn, 40)
			}
			stop := make(chan struct{})
			var carvedStale, stayStale atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, len(tenants)+1)
			for i, tn := range append([]string{stay}, tenants...) {
				c, counter := e.client(), &carvedStale
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
				LeaseTTL: 300 * time.Millisecond, OnState: func(s migrate.Status) {
					if os.Getenv("CARVE_DEBUG") != "" {
						t.Logf("%s %s applied %s logapplied %d", s.ID, s.State, s.Applied, s.LogApplied)
					}
				}})
			require.NoError(t, err)
			for i, tc := range cases {
				id := fmt.Sprintf("%s-lost-%d", name, i)
				before := inj.Dropped()
				if tc.arg != "" {
					inj.DropReply(faults.Match{Command: "EVALSHA", Arg: tc.arg}, 1)
				}
				st, err := co.Carve(ctx, migrate.CarveSpec{ID: id, Tenant: tenants[i], Target: dst})
				for attempt := 0; err != nil && attempt < 5; attempt++ {
					require.NotErrorIs(t, err, migrate.ErrAborted, "%s: %v", tc.what, err)
					st, err = co.Resume(ctx, id)
				}
				require.NoError(t, err, tc.what)
				require.Equal(t, migrate.OwnedB, st.State, tc.what)
				if tc.arg != "" {
					require.Equal(t, before+1, inj.Dropped(), "%s: a reply was lost", tc.what)
				}
				require.Equal(t, dst, e.table().Overrides[tenants[i]], tc.what)
				require.Equal(t, routing.StateOpen, e.own(dst, routing.TenantUnit(tenants[i])).State)
				claims, err := co.Claims(ctx, routing.TenantUnit(tenants[i]))
				require.NoError(t, err)
				require.Empty(t, claims)
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Zero(t, stayStale.Load(), "the neighbour that stayed never met a stale route")
			m.check(t, e, src, bu, stay)
			for _, tn := range tenants {
				m.check(t, e, dst, routing.TenantUnit(tn), tn)
			}
		})
	}
}

// A carve-out holds its bucket's lock: neither a move of the bucket nor another carve-out
// of it starts meanwhile. After it, the bucket moves on with the tenant's mark: the new
// owner of the bucket refuses the carved tenant too, and a client on the oldest table
// reaches the tenant's own unit.
func TestCarveOutHoldsTheBucketLockAndTheMarkMovesWithTheBucket(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	fat := "lock-fat"
	neighbour := sameBucket(fat, "lock-n-", 1)[0]
	bu := routing.BucketUnit(routing.BucketOf(fat, testBuckets))
	src := e.openOwner(bu)
	dst := other(src)
	m := newTModel()
	old := e.client()
	m.seed(t, old, fat, 50)
	m.seed(t, old, neighbour, 50)
	co := e.coordinator(migrate.Options{})

	st, err := co.StartCarve(ctx, migrate.CarveSpec{ID: "c1", Tenant: fat, Target: dst})
	require.NoError(t, err)
	var busy *migrate.BusyError
	_, err = co.Start(ctx, migrate.Spec{Unit: bu, Target: dst})
	require.ErrorAs(t, err, &busy)
	require.Equal(t, "c1", busy.Holder)
	_, err = co.StartCarve(ctx, migrate.CarveSpec{Tenant: neighbour, Target: dst})
	require.ErrorIs(t, err, migrate.ErrBusy)
	st, err = co.Resume(ctx, st.ID)
	require.NoError(t, err)
	require.Contains(t, st.String(), "carve-out of "+bu.String())

	mv, err := co.Migrate(ctx, migrate.Spec{Unit: bu, Target: dst})
	require.NoError(t, err, "the bucket moves once the carve-out is done")
	tb := e.table()
	require.Equal(t, mv.FlipGen, tb.Generation)
	_, err = e.shards[dst].Exec(ctx, bu, tb.Generation, fat, "direct", routing.Put("k", "v"))
	require.ErrorIs(t, err, routing.ErrStaleRoute, "the bucket's new owner refuses the carved tenant")
	res, stale, err := old.tdo(ctx, fat, "via-old-table", routing.Put("k", "v"))
	require.NoError(t, err)
	require.Equal(t, 1, stale)
	m.ack(fat, "k", routing.Put("k", "v"), "via-old-table", res)
	res, _, err = old.tdo(ctx, neighbour, "n-after", routing.Put("k", "v"))
	require.NoError(t, err)
	m.ack(neighbour, "k", routing.Put("k", "v"), "n-after", res)
	m.check(t, e, dst, routing.TenantUnit(fat), fat)
	m.check(t, e, dst, bu, neighbour)
}
