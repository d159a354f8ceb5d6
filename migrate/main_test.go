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
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

func TestMain(m *testing.M) {
	// CELEBRITYTEST_ACL=migrate runs every test as a user holding only the package's rule (one
	// Redis user for the control Redis and the shards), for a prefix pattern covering the
	// prefixes the tests build (the env's prefix, celebritytest.Prefix without its colon).
	celebritytest.RegisterRule("migrate", func(p string) []string { return migrate.ACLRule(migrate.Options{Prefix: p + "*"}) })
	celebritytest.Main(m)
}

const testBuckets = 16

// env is a control Redis, named shards with their routing view, a published table
// (generation 1: buckets split evenly over the first two shards) and ownership records open
// on the owners of the buckets a test uses.
type env struct {
	t       testing.TB
	prefix  string
	control migrate.Control
	clients map[string]migrate.ShardClient
	shards  map[string]*routing.Shard
	store   *routing.Store
}

// newEnv builds an env over standalone servers: the control Redis on one, shards "a" and
// "b" on two others.
func newEnv(t testing.TB, so routing.ShardOptions) *env {
	t.Helper()
	srv := celebritytest.Shards(t, 3)
	clients := map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": srv[2].Client(t)}
	return newEnvOver(t, srv[0].Client(t), clients, so)
}

func newEnvOver(t testing.TB, control migrate.Control, clients map[string]migrate.ShardClient, so routing.ShardOptions) *env {
	t.Helper()
	e := &env{t: t, prefix: strings.TrimSuffix(celebritytest.NewPrefix(t), ":"), control: control, clients: clients,
		shards: map[string]*routing.Shard{}}
	so.Prefix = e.prefix
	names := make([]string, 0, len(clients))
	for name, c := range clients {
		s, err := routing.NewShard(name, c, so)
		require.NoError(t, err)
		e.shards[name] = s
		names = append(names, name)
	}
	st, err := routing.NewStore(control, routing.StoreOptions{Prefix: e.prefix})
	require.NoError(t, err)
	e.store = st
	sortStrings(names)
	require.NoError(t, st.Publish(testkit.Ctx(t), routing.EvenTable(1, testBuckets, names...)))
	return e
}

func sortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

// coordinator returns a new Coordinator over the env (a fresh one stands for a restarted
// process).
func (e *env) coordinator(o migrate.Options) *migrate.Coordinator {
	e.t.Helper()
	o.Shards = e.clients
	o.Prefix = e.prefix
	c, err := migrate.New(e.control, o)
	require.NoError(e.t, err)
	return c
}

// openOwner opens unit u on the shard the current table assigns it to.
func (e *env) openOwner(u routing.Unit) string {
	e.t.Helper()
	t, err := e.store.Load(testkit.Ctx(e.t))
	require.NoError(e.t, err)
	owner := t.Owner(u)
	_, err = e.shards[owner].Transition(testkit.Ctx(e.t), u, routing.Ownership{},
		routing.Ownership{Generation: t.Generation, State: routing.StateOpen})
	require.NoError(e.t, err)
	return owner
}

func (e *env) table() *routing.Table {
	e.t.Helper()
	t, err := e.store.Load(testkit.Ctx(e.t))
	require.NoError(e.t, err)
	return t
}

func (e *env) own(name string, u routing.Unit) routing.Ownership {
	e.t.Helper()
	o, _, err := e.shards[name].Ownership(testkit.Ctx(e.t), u)
	require.NoError(e.t, err)
	return o
}

// records returns unit u's stored records on shard name, decoded, by record field.
func (e *env) records(name string, u routing.Unit) map[string]routing.Record {
	e.t.Helper()
	m, err := e.clients[name].(redis.Cmdable).HGetAll(testkit.Ctx(e.t), routingfmt.Keys(e.shards[name].Keys().Tag(u)).Records).Result()
	require.NoError(e.t, err)
	out := make(map[string]routing.Record, len(m))
	for f, v := range m {
		r, err := routingfmt.DecodeRecord(v)
		require.NoError(e.t, err)
		out[f] = r
	}
	return out
}

// ops returns unit u's idempotency records on shard name.
func (e *env) ops(name string, u routing.Unit) map[string]string {
	e.t.Helper()
	m, err := e.clients[name].(redis.Cmdable).HGetAll(testkit.Ctx(e.t), routingfmt.Keys(e.shards[name].Keys().Tag(u)).Ops).Result()
	require.NoError(e.t, err)
	return m
}

// dataKeys counts the data keys (records, ops, expiries, tombstones, log) of u on name.
func (e *env) dataKeys(name string, u routing.Unit) int64 {
	e.t.Helper()
	k := routingfmt.Keys(e.shards[name].Keys().Tag(u))
	var n int64
	for _, key := range []string{k.Records, k.Ops, k.OpExpiry, k.Tombstones, k.Log} {
		x, err := e.clients[name].(redis.Cmdable).Exists(testkit.Ctx(e.t), key).Result()
		require.NoError(e.t, err)
		n += x
	}
	return n
}

// client is a routed writer: it carries a table, writes with that table's generation, and
// on ErrStaleRoute reloads the table (waiting while a flip is in progress) and retries with
// the same op ID, like routing's Router.Do.
type client struct {
	e     *env
	mu    sync.Mutex
	t     *routing.Table
	stale atomic.Int64
}

func (e *env) client() *client { return &client{e: e, t: e.table()} }

func (c *client) table() *routing.Table {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *client) do(ctx context.Context, u routing.Unit, tenant, opID string, op routing.Op) (routing.Result, error) {
	for {
		t := c.table()
		res, err := c.e.shards[t.Owner(u)].Exec(ctx, u, t.Generation, tenant, opID, op)
		if !errors.Is(err, routing.ErrStaleRoute) {
			return res, err
		}
		c.stale.Add(1)
		if err := c.refresh(ctx, t.Generation); err != nil {
			return res, err
		}
	}
}

// refresh reloads the table; while it is not newer than gen and the unit's owner has not
// reopened, it polls the control Redis.
func (c *client) refresh(ctx context.Context, gen uint64) error {
	for i := 0; ; i++ {
		t, err := c.e.store.Load(ctx)
		if err != nil {
			return err
		}
		c.mu.Lock()
		if t.Generation > c.t.Generation {
			c.t = t
		}
		c.mu.Unlock()
		if t.Generation > gen || i > 0 && i%50 == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// model is the expected state of one unit: per record field, the last acknowledged write.
type model struct {
	id   int64
	pace time.Duration // pause between a writer's writes (0: none)
	mu   sync.Mutex
	recs map[string]routing.Record
	ops  map[string]routing.Result
}

var models atomic.Int64

func newModel() *model {
	return &model{id: models.Add(1), recs: map[string]routing.Record{}, ops: map[string]routing.Result{}}
}

// writer writes random puts and deletes to its own keys of unit u (so the model of each key
// is exact) until stop is closed, recording every acknowledged result, pausing m.pace
// between writes.
func (m *model) writer(ctx context.Context, c *client, u routing.Unit, name string, keys int, stop <-chan struct{}, seq *atomic.Int64) error {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		key := fmt.Sprintf("%s-k%d", name, i%keys)
		opID := fmt.Sprintf("m%d-%s-op%d", m.id, name, seq.Add(1))
		op := routing.Put(key, fmt.Sprintf("v%d", i))
		if i%7 == 3 {
			op = routing.Delete(key)
		}
		res, err := c.do(ctx, u, "course", opID, op)
		if err != nil {
			return fmt.Errorf("writer %s op %s: %w", name, opID, err)
		}
		m.ack(key, op, opID, res)
		if m.pace > 0 {
			time.Sleep(m.pace)
		}
	}
}

func (m *model) ack(key string, op routing.Op, opID string, res routing.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops[opID] = res
	if !res.Applied {
		return
	}
	f := routingfmt.RecordField("course", key)
	if op.Kind == routing.OpDelete {
		m.recs[f] = routing.Record{Version: res.Version, Deleted: true}
	} else {
		m.recs[f] = routing.Record{Version: res.Version, Value: op.Value}
	}
}

// check requires shard name's copy of u to equal the model: every acknowledged write is
// there with its version, nothing else is, and every acknowledged op has its record.
func (m *model) check(t testing.TB, e *env, name string, u routing.Unit) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	got := e.records(name, u)
	require.Equal(t, len(m.recs), len(got), "record count on %s", name)
	for f, want := range m.recs {
		require.Equal(t, want, got[f], "record %q on %s", f, name)
	}
	ops := e.ops(name, u)
	for id, res := range m.ops {
		rec, ok := ops[routing.OpKey("course", id)]
		require.True(t, ok, "op %s missing on %s", id, name)
		or, err := routingfmt.DecodeOpRecord(rec)
		require.NoError(t, err)
		require.Equal(t, res.Version, or.Version, "op %s version on %s", id, name)
	}
}

// seed writes n records through the current owner.
func (m *model) seed(t testing.TB, c *client, u routing.Unit, n int) {
	t.Helper()
	ctx := testkit.Ctx(t)
	for i := 0; i < n; i++ {
		key, opID := fmt.Sprintf("seed-%d", i), fmt.Sprintf("m%d-seed-op-%d", m.id, i)
		op := routing.Put(key, fmt.Sprintf("s%d", i))
		res, err := c.do(ctx, u, "course", opID, op)
		require.NoError(t, err)
		m.ack(key, op, opID, res)
	}
}

// observer watches the ownership records of u on shards x and y and counts instants at which
// both were open: it reads x, then y, then x again, and only a y-open read sandwiched
// between two x-open reads proves both open at once.
type observer struct {
	both, reads atomic.Int64
	stop        chan struct{}
	done        chan struct{}
}

func (e *env) observe(u routing.Unit, x, y string) *observer {
	o := &observer{stop: make(chan struct{}), done: make(chan struct{})}
	kx, ky := routingfmt.Keys(e.shards[x].Keys().Tag(u)).Own, routingfmt.Keys(e.shards[y].Keys().Tag(u)).Own
	cx, cy := e.clients[x].(redis.Cmdable), e.clients[y].(redis.Cmdable)
	ctx := context.Background()
	state := func(c redis.Cmdable, k string) string { s, _ := c.HGet(ctx, k, "state").Result(); return s }
	go func() {
		defer close(o.done)
		for {
			select {
			case <-o.stop:
				return
			default:
			}
			a1 := state(cx, kx)
			b := state(cy, ky)
			a2 := state(cx, kx)
			b2 := state(cy, ky)
			o.reads.Add(1)
			if a1 == "open" && b == "open" && a2 == "open" || b == "open" && a2 == "open" && b2 == "open" {
				o.both.Add(1)
			}
		}
	}()
	return o
}

func (o *observer) finish(t testing.TB) {
	t.Helper()
	close(o.stop)
	<-o.done
	require.Positive(t, o.reads.Load())
	require.Zero(t, o.both.Load(), "two owners observed open at once")
}
