package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// Clients of routing's versioned record store, each calling Router.Do (puts, deletes, and
// their compare-and-set forms) and Router.Get on a few records of two tenants that share a
// hash bucket, while a driver moves the bucket, carves the hot tenant out of it, splits the
// tenant over two shards, merges it back onto one, folds it back into its bucket and moves
// the bucket home. Porcupine checks that the whole history is linearizable: every reply
// could have come from one instant inside its call, in one order for each record, however
// the moves fell between the calls.
//
// The actors:
//   - a stock Router (zero Options, go-redis clients with their default retries), whose
//     clients lose replies that go-redis retries on their own;
//   - a Router whose table goes stale: it hears no announcement and polls once an hour, so
//     it learns a new table only when a shard refuses its route; its go-redis clients do not
//     retry, so a lost reply reaches its caller, who either gives up (the call stays in the
//     history with an unknown outcome, as in Jepsen) or, holding the operation across the
//     next move, retries it with the same operation ID through its stale table and must get
//     the first attempt's result from the new owner;
//   - a reader on another such Router, which only reads: it learns a new table only when a
//     shard refuses one of its reads;
//   - the migration driver, which loses replies of the clients at chosen states (the copy,
//     the catch-up, the barrier, the flip) and waits in the catch-up for the clients to
//     write what it must catch up with;
//   - a reader that reads every record once the clients stopped.
//
// Standalone shards, and a 3-master cluster holding the bucket's first and last owner (and
// the control Redis), two rounds of the six moves with four clients.
func TestRouterDoStaysLinearizableThroughMoves(t *testing.T) {
	for name, le := range linEnvs(t) {
		t.Run(name, func(t *testing.T) { le.run(t, linPlan{clients: 4, rounds: 2}) })
	}
}

// The same check over four rounds of the six moves with six clients: every move copies the
// idempotency records of all the rounds before it, and a unit comes back to shards that
// hold its closed copies from earlier rounds.
func TestRouterDoStaysLinearizableThroughRepeatedMoves(t *testing.T) {
	celebritytest.Long(t)
	for name, le := range linEnvs(t) {
		t.Run(name, func(t *testing.T) { le.run(t, linPlan{clients: 6, rounds: 4}) })
	}
}

// linPlan sizes a run: clients (half on the stock Router, a quarter on each stale one) and
// rounds of the six moves.
type linPlan struct {
	clients, rounds int
}

// linEnv is an env whose Routers reach the shards through clients that lose replies: each
// shard's dial makes a client whose every connection passes a faults.Injector.
type linEnv struct {
	e     *env
	dial  map[string]func(t *testing.T, in *faults.Injector, retries bool) routing.ShardClient
	quiet routing.Control // a Redis on which nobody announces this env's tables
}

func linEnvs(t *testing.T) map[string]*linEnv {
	srv := celebritytest.Shards(t, 6)
	standalone := func(s *celebritytest.Server) func(*testing.T, *faults.Injector, bool) routing.ShardClient {
		return func(t *testing.T, in *faults.Injector, retries bool) routing.ShardClient {
			return s.Client(t, func(o *redis.Options) {
				o.Dialer = in.Dialer(nil)
				if !retries {
					o.MaxRetries = -1
				}
			})
		}
	}
	std := &linEnv{
		e: newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": srv[2].Client(t),
			"c": srv[3].Client(t), "d": srv[4].Client(t)}, routing.ShardOptions{}),
		dial: map[string]func(*testing.T, *faults.Injector, bool) routing.ShardClient{"a": standalone(srv[1]),
			"b": standalone(srv[2]), "c": standalone(srv[3]), "d": standalone(srv[4])},
		quiet: srv[5].Client(t),
	}
	cl := celebritytest.SharedCluster(t)
	clu := &linEnv{
		e: newEnvOver(t, cl.Client(t), map[string]migrate.ShardClient{"a": cl.Client(t), "b": srv[2].Client(t),
			"c": srv[3].Client(t), "d": srv[4].Client(t)}, routing.ShardOptions{}),
		dial: map[string]func(*testing.T, *faults.Injector, bool) routing.ShardClient{
			"a": func(t *testing.T, in *faults.Injector, retries bool) routing.ShardClient {
				return cl.Client(t, func(o *redis.ClusterOptions) {
					o.Dialer = in.Dialer(nil)
					if !retries {
						o.MaxRetries, o.MaxRedirects = -1, -1
					}
				})
			},
			"b": standalone(srv[2]), "c": standalone(srv[3]), "d": standalone(srv[4])},
		quiet: srv[5].Client(t),
	}
	return map[string]*linEnv{"standalone": std, "cluster": clu}
}

// shards returns a client of every shard through in; retries false turns go-redis's own
// retries off, so that a lost reply reaches the caller.
func (le *linEnv) shards(t *testing.T, in *faults.Injector, retries bool) map[string]routing.ShardClient {
	out := make(map[string]routing.ShardClient, len(le.dial))
	for name, dial := range le.dial {
		out[name] = dial(t, in, retries)
	}
	return out
}

// deafControl is the control Redis of a Router that hears no announcement: it reads tables
// from the control Redis but subscribes on another Redis, where nobody publishes, as a
// process whose subscription is cut off.
type deafControl struct {
	routing.Control
	quiet routing.Control
}

func (d deafControl) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return d.quiet.Subscribe(ctx, channels...)
}

// linRun is one run: the clients' shared history and what the driver waits on.
type linRun struct {
	t     *testing.T
	start time.Time
	stop  chan struct{}

	mu      sync.Mutex
	history []porcupine.Operation
	ids     int // porcupine client IDs handed out
	fails   []error

	done  progress
	moves flips

	// Figures.
	retried, replayed, replayedMoved, unknown, gaveUp atomic.Int64
}

func (r *linRun) now() int64 { return time.Since(r.start).Nanoseconds() }

func (r *linRun) newClientID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids++
	return r.ids - 1
}

func (r *linRun) record(op porcupine.Operation) {
	r.mu.Lock()
	r.history = append(r.history, op)
	r.mu.Unlock()
	r.done.add()
}

func (r *linRun) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails = append(r.fails, err)
}

func (le *linEnv) run(t *testing.T, plan linPlan) {
	e := le.e
	ctx := testkit.Ctx(t)
	began := time.Now()
	hot := tenantOn(e, "hot-", "a")
	cold := sameBucket(hot, "cold-", 1)[0]
	bu := routing.BucketUnit(routing.BucketOf(hot, testBuckets))
	e.openOwner(bu)

	stock, stale := faults.New(), faults.New()
	newRouter := func(control routing.Control, o routing.Options) *routing.Router {
		o.Prefix = e.prefix
		r, err := routing.New(control, o)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, r.Close()) })
		_, err = r.Await(ctx, 1)
		require.NoError(t, err)
		return r
	}
	// The stock Router; the stale writers' and the stale readers' Routers, deaf to
	// announcements and polling once an hour.
	r0 := newRouter(e.control, routing.Options{Shards: le.shards(t, stock, true)})
	deaf := deafControl{Control: e.control, quiet: le.quiet}
	r1 := newRouter(deaf, routing.Options{Shards: le.shards(t, stale, false), PollInterval: time.Hour})
	r2 := newRouter(deaf, routing.Options{Shards: le.shards(t, stale, false), PollInterval: time.Hour})

	run := &linRun{t: t, start: time.Now(), stop: make(chan struct{})}
	var records [][2]string // the hot tenant's six records (over both sub-buckets of its spread) and three of its neighbour's
	for k := range 6 {
		records = append(records, [2]string{hot, fmt.Sprintf("k%d", k)})
	}
	for k := range 3 {
		records = append(records, [2]string{cold, fmt.Sprintf("k%d", k)})
	}
	var wg sync.WaitGroup
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range plan.clients {
		c := &linClient{run: run, name: fmt.Sprintf("c%d", i), id: run.newClientID(), r: r0, records: records,
			reads: 35, rnd: rand.New(rand.NewPCG(uint64(i), 33)), seen: map[string]uint64{}}
		switch i % 4 {
		case 1:
			c.r = r1
		case 3:
			c.r, c.reads = r2, 100
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.loop(cctx)
		}()
	}
	stopped := false
	stopClients := func() {
		if !stopped {
			stopped = true
			if t.Failed() {
				cancel() // a call waiting for a table that a failed move never published
			}
			close(run.stop)
			wg.Wait()
		}
	}
	defer stopClients()

	// The driver loses replies at chosen states and waits in the catch-up for the clients.
	var last migrate.State
	co := e.coordinator(migrate.Options{OnState: func(s migrate.Status) {
		if s.State == last {
			return
		}
		last = s.State
		switch s.State {
		case migrate.Copying:
			// A write applied on the source whose caller holds it across the move.
			stale.DropReply(faults.Match{Command: "EVALSHA", Arg: "op:"}, 1)
		case migrate.CatchingUp:
			stock.DropReply(faults.Match{Command: "EVALSHA"}, 1)
			stale.DropReply(faults.Match{Command: "EVALSHA", Arg: "op:"}, 1)
			run.waitFor(ctx, 20)
		case migrate.ClosedA, migrate.ReadyB:
			stock.DropReply(faults.Match{Command: "EVALSHA"}, 1)
		}
	}})
	moves := []struct {
		name string
		do   func() (migrate.Status, error)
	}{
		{"move the bucket to b", func() (migrate.Status, error) {
			return co.Migrate(ctx, migrate.Spec{Unit: bu, Target: "b"})
		}},
		{"carve the hot tenant out to c", func() (migrate.Status, error) {
			return co.Carve(ctx, migrate.CarveSpec{Tenant: hot, Target: "c"})
		}},
		{"split it over d and a", func() (migrate.Status, error) {
			return co.Split(ctx, migrate.SplitSpec{Tenant: hot, Targets: []string{"d", "a"}})
		}},
		{"merge it onto b", func() (migrate.Status, error) {
			return co.Merge(ctx, migrate.MergeSpec{Tenant: hot, Target: "b"})
		}},
		{"fold it back into its bucket", func() (migrate.Status, error) {
			return co.Fold(ctx, migrate.FoldSpec{Tenant: hot})
		}},
		{"move the bucket back to a", func() (migrate.Status, error) {
			return co.Migrate(ctx, migrate.Spec{Unit: bu, Target: "a"})
		}},
	}
	run.waitFor(ctx, 40)
	for round := range plan.rounds {
		for _, m := range moves {
			last = ""
			st, err := m.do()
			require.NoError(t, err, "round %d: %s", round, m.name)
			require.Equal(t, migrate.OwnedB, st.State, "round %d: %s", round, m.name)
			run.moves.flip()
			run.waitFor(ctx, 40) // the clients act on the new table before the next move
		}
	}
	stopClients()

	// A reader on a fresh Router reads every record once, after every other call returned
	// (or was given up): the final state the history must explain.
	reader := &linClient{run: run, name: "reader", id: run.newClientID(), seen: map[string]uint64{},
		r: newRouter(e.control, routing.Options{Shards: scripters(e)})}
	for _, rec := range records {
		reader.call(ctx, kvInput{Kind: kvGet, Tenant: rec[0], Key: rec[1]})
	}

	checkStart := time.Now()
	requireLinearizable(t, run.history, time.Minute)
	checked := time.Since(checkStart)
	require.Empty(t, run.fails, "calls failed other than by a lost reply or a Router that gave up redirecting")
	require.Less(t, 2*run.unknown.Load(), int64(len(run.history)), "most calls have a known outcome: the history checks something")
	redirects := r1.Stats().Redirects + r2.Stats().Redirects
	t.Logf("%d calls (%d clients, %d rounds of %d moves), %d replies lost (%d by go-redis's retries, %d to callers), "+
		"%d calls retried by their callers after a move, %d replayed (%d by another owner), %d left with an unknown outcome "+
		"(%d given up after the Router's redirects); the stale Routers were redirected %d times; checked in %v, run in %v",
		len(run.history), plan.clients, plan.rounds, len(moves), stock.Dropped()+stale.Dropped(), stock.Dropped(),
		stale.Dropped(), run.retried.Load(), run.replayed.Load(), run.replayedMoved.Load(), run.unknown.Load(),
		run.gaveUp.Load(), redirects, checked, time.Since(began))
	// The run did what it claims: replies were lost on both kinds of Router, the stale
	// Routers met refusals, and a lost write was replayed by the unit's new owner.
	require.Positive(t, stock.Dropped())
	require.Positive(t, stale.Dropped())
	require.Positive(t, redirects)
	require.Positive(t, run.replayedMoved.Load(), "a write whose reply was lost, retried after a move, replayed by the new owner")
}

func scripters(e *env) map[string]routing.ShardClient {
	out := make(map[string]routing.ShardClient, len(e.clients))
	for n, c := range e.clients {
		out[n] = c
	}
	return out
}

// waitFor waits until the clients recorded n more calls.
func (r *linRun) waitFor(ctx context.Context, n int64) {
	r.t.Helper()
	select {
	case <-r.done.after(n):
	case <-ctx.Done():
		r.t.Fatalf("the clients recorded fewer than %d calls: %v", n, ctx.Err())
	}
}

// callTimeout bounds one attempt of a call: far above a move's write pause, so that a call
// that runs into it is a failure of the run.
const callTimeout = 30 * time.Second

// linClient is one client: one call at a time, each recorded in the history.
type linClient struct {
	run     *linRun
	name    string
	id      int // porcupine client ID; a new one after a call left with an unknown outcome
	r       *routing.Router
	reads   int // the share of its calls that are gets, in percent
	rnd     *rand.Rand
	records [][2]string
	seen    map[string]uint64 // the last version seen of each record, for conditional writes
	n       int
	losses  int
}

func (c *linClient) loop(ctx context.Context) {
	for {
		select {
		case <-c.run.stop:
			return
		default:
		}
		c.call(ctx, c.next())
	}
}

// next picks a record and a call: gets, puts and deletes, most writes conditional on the
// version the client saw last.
func (c *linClient) next() kvInput {
	c.n++
	rec := c.records[c.rnd.IntN(len(c.records))]
	in := kvInput{Tenant: rec[0], Key: rec[1], OpID: fmt.Sprintf("op:%s:%d", c.name, c.n),
		Value: fmt.Sprintf("%s-%d", c.name, c.n), Version: c.seen[rec[0]+"/"+rec[1]]}
	switch x := c.rnd.IntN(100); {
	case x < c.reads:
		in.Kind, in.Value, in.OpID, in.Version = kvGet, "", "", 0
	case x < c.reads+20:
		in.Kind, in.Version = kvPut, 0
	case x < c.reads+45:
		in.Kind = kvPutIf
	case x < c.reads+53:
		in.Kind, in.Value, in.Version = kvDel, "", 0
	default:
		in.Kind, in.Value = kvDelIf, ""
	}
	return in
}

func (in kvInput) op() routing.Op {
	switch in.Kind {
	case kvPut:
		return routing.Put(in.Key, in.Value)
	case kvPutIf:
		return routing.PutIf(in.Key, in.Value, in.Version)
	case kvDel:
		return routing.Delete(in.Key)
	default:
		return routing.DeleteIf(in.Key, in.Version)
	}
}

// once makes one attempt of in.
func (c *linClient) once(ctx context.Context, in kvInput) (kvOutput, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if in.Kind == kvGet {
		rec, ok, err := c.r.Get(ctx, in.Tenant, in.Key)
		return kvOutput{Found: ok, Deleted: rec.Deleted, Value: rec.Value, Version: rec.Version}, false, err
	}
	res, err := c.r.Do(ctx, in.Tenant, in.OpID, in.op())
	var mismatch *routing.VersionMismatchError
	if errors.As(err, &mismatch) {
		return kvOutput{Mismatch: true, Version: mismatch.Current}, res.Replayed, nil
	}
	return kvOutput{Applied: res.Applied, Version: res.Version}, res.Replayed, err
}

// call makes in and records it. A lost reply that reaches the client (its Router's go-redis
// clients do not retry) leaves the outcome unknown: every other time the client gives up and
// the call stays in the history with its return at infinity (the client goes on as a new
// porcupine client, as a Jepsen process does after an indeterminate call); otherwise it
// holds the call until the next move is over and retries it with the same operation ID,
// which must return the first attempt's result.
func (c *linClient) call(ctx context.Context, in kvInput) {
	before := c.route(in)
	op := porcupine.Operation{ClientId: c.id, Input: in, Call: c.run.now()}
	out, replayed, err := c.once(ctx, in)
	lost := errors.Is(err, faults.ErrReplyDropped)
	if lost {
		c.losses++
	}
	if lost && c.losses%2 == 1 {
		select {
		case <-c.run.moves.next():
		case <-c.run.stop:
		}
		c.run.retried.Add(1)
		for attempt := 0; attempt < 5; attempt++ {
			if out, replayed, err = c.once(ctx, in); !errors.Is(err, faults.ErrReplyDropped) {
				break
			}
		}
	}
	op.Return = c.run.now()
	after := c.route(in)
	op.Metadata = fmt.Sprintf("%s: routed by gen %d to %s, returned at gen %d (%s)", c.name, before.gen, before.at, after.gen, after.at)
	if err != nil {
		switch {
		case errors.Is(err, faults.ErrReplyDropped):
		case errors.Is(err, routing.ErrStaleRoute):
			// The Router gave up after Options.MaxRedirects, as documented, when the moves
			// outran its table's refreshes on a loaded machine. A redirect may follow a lost
			// reply, so the outcome stays unknown.
			c.run.gaveUp.Add(1)
		default:
			c.run.fail(fmt.Errorf("%s: %s: %w", c.name, describeKV(in, kvOutput{Unknown: true}), err))
		}
		op.Output, op.Return = kvOutput{Unknown: true}, never
		op.Metadata = fmt.Sprintf("%v; outcome unknown: %v", op.Metadata, err)
		c.run.unknown.Add(1)
		c.run.record(op)
		c.id = c.run.newClientID()
		return
	}
	if lost {
		op.Metadata = fmt.Sprintf("%v; reply lost, retried after a move (replayed: %v)", op.Metadata, replayed)
		if replayed {
			c.run.replayed.Add(1)
			if before.at != after.at {
				c.run.replayedMoved.Add(1)
			}
		}
	}
	op.Output = out
	c.run.record(op)
	c.saw(in, out)
}

// saw notes the version a reply shows, for the client's next conditional write of the
// record (0: absent or deleted).
func (c *linClient) saw(in kvInput, out kvOutput) {
	k := in.Tenant + "/" + in.Key
	switch {
	case in.Kind == kvGet && out.Found && !out.Deleted, out.Mismatch:
		c.seen[k] = out.Version
	case in.Kind == kvGet, in.Kind == kvDel, in.Kind == kvDelIf:
		c.seen[k] = 0
	default: // an applied put
		c.seen[k] = out.Version
	}
}

// route is where the client's Router routes in now: the generation, and the unit and shard.
func (c *linClient) route(in kvInput) (r struct {
	gen uint64
	at  string
}) {
	rt, err := c.r.Route(in.Tenant, in.Key)
	if err != nil {
		r.at = err.Error()
		return r
	}
	r.gen, r.at = rt.Generation, fmt.Sprintf("%s on %s", rt.Unit, rt.Shard.Name())
	return r
}

// progress counts the calls the clients recorded; the driver waits on it.
type progress struct {
	mu    sync.Mutex
	n     int64
	waits []progressWait
}

type progressWait struct {
	at int64
	ch chan struct{}
}

func (p *progress) add() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	keep := p.waits[:0]
	for _, w := range p.waits {
		if w.at <= p.n {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	p.waits = keep
}

// after returns a channel closed once n more calls are recorded.
func (p *progress) after(n int64) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	p.waits = append(p.waits, progressWait{at: p.n + n, ch: ch})
	return ch
}

// flips tells the clients that a move is over.
type flips struct {
	mu sync.Mutex
	ch chan struct{}
}

// next returns a channel closed when the next move is over.
func (f *flips) next() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch
}

func (f *flips) flip() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch != nil {
		close(f.ch)
	}
	f.ch = make(chan struct{})
}
