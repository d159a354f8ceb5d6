package stripes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celebrity-go/celebrity/internal/script"
)

// Counter is a striped counter with exactly-once events. It is safe for concurrent use.
// A Counter holds no Redis connection of its own: it runs on the host's client. Close stops
// its background seal loop.
type Counter struct {
	client Client
	opts   Options
	keys   keys
	layout atomic.Pointer[layout]
	stats  counterStats
	// maxVer is the highest layout version this process has read; birthOK is set once the
	// birth record was checked (and written if missing).
	maxVer  atomic.Uint64
	birthOK atomic.Bool
	views   dedupViews

	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// Event is one countable occurrence. Retries of an event must carry the same Event: the
// same ID, the same Time and the same Gen.
type Event struct {
	// ID identifies the event (a view ID, a message ID). Required; 1..Options.MaxIDBytes bytes
	// of any value: binary IDs (a raw UUID, a hash) are accepted as they are. Only the ID's
	// xxhash64 is stored, never the ID itself.
	ID string
	// Time is when the event first happened or was first attempted. Required. It fixes the
	// event's dedup slice and, when Gen is 0, its generation; it must lie within one
	// DedupWindow of the Redis server's clock when Add runs (else ErrTooOld, or ErrInvalid
	// for a time ahead). The clock is read when the event's stripe has no records of its
	// slice yet (or they expired); an event of a slice whose records the stripe still keeps
	// is checked against them instead, so it may be taken up to two slices
	// (DedupWindow/DedupSlices each) past the window behind, or one slice past it ahead:
	// every earlier attempt of it is still among those records.
	Time time.Time
	// Gen, if non-zero, is the generation the event belongs to, as returned by
	// [Counter.Stamp]. If zero, the generation is derived from Time and the recorded
	// boundaries of the layout.
	Gen uint64
}

// Result reports what Add did.
type Result struct {
	// Applied is true if this call counted the event, false if the event had already been
	// counted (by an earlier call, or by an earlier attempt of this very call whose reply
	// was lost and which go-redis retried).
	Applied bool
	// Gen and Stripe are where the event lives.
	Gen    uint64
	Stripe int
}

// New returns a Counter named o.Name on client. It does no I/O: the layout record is read,
// or created with o.Stripes stripes, on first use. Unless o.SealInterval is negative, New
// starts a background loop that seals old generations; Close stops it.
func New(client Client, o Options) (*Counter, error) {
	if client == nil {
		return nil, invalidf("client must not be nil")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Counter{client: client, opts: o, keys: keys{prefix: o.Prefix, name: o.Name}, stop: make(chan struct{})}
	if o.SealInterval > 0 {
		c.done.Add(1)
		go c.sealLoop()
	}
	return c, nil
}

// Close stops the background seal loop and waits for it. It does not close the client.
// Close is idempotent; the Counter stays usable for Add, Sum, Resize and Seal.
func (c *Counter) Close() error {
	c.once.Do(func() { close(c.stop) })
	c.done.Wait()
	return nil
}

// Stamp returns an Event for id with the current time and the current generation. A host
// that has no event time of its own stores the returned Event with its work and passes it
// unchanged on every retry. The layout may be cached for up to Options.LayoutMaxAge.
func (c *Counter) Stamp(ctx context.Context, id string) (Event, error) {
	if err := c.checkID(id); err != nil {
		return Event{}, err
	}
	l, err := c.cachedLayout(ctx, c.opts.LayoutMaxAge)
	if err != nil {
		return Event{}, err
	}
	return Event{ID: id, Time: c.opts.Clock(), Gen: l.current().Gen}, nil
}

func (c *Counter) checkID(id string) error {
	if id == "" || len(id) > c.opts.MaxIDBytes {
		return invalidf("Event.ID must be 1..%d bytes, got %d", c.opts.MaxIDBytes, len(id))
	}
	return nil
}

// Add counts ev once: delta is added to one stripe of ev's generation unless the event was
// already counted there. The dedup check and the increment are one script in the stripe's
// hash slot, so concurrent and retried calls with the same event count it once. Add returns
// ErrTooOld if the event's generation was sealed or its Time is more than DedupWindow behind
// the server's clock (see Event.Time), ErrUnknownGeneration if ev.Gen does not exist, and an
// ErrInvalid error for bad input or a delta that would overflow its stripe's int64 value
// (retrying it cannot succeed); in all these cases nothing was written. On any other error the event may or
// may not have been counted: retry it with the same Event.
//
// Delta may be negative (see the package doc for what concurrent readers may then see);
// it must not be zero.
func (c *Counter) Add(ctx context.Context, ev Event, delta int64) (Result, error) {
	if err := c.checkAdd(ev, delta); err != nil {
		return Result{}, err
	}
	l, fresh := c.layout.Load(), false
	if l == nil {
		var err error
		if l, err = c.ensureLayout(ctx); err != nil {
			return Result{}, err
		}
		fresh = true
	}
	r := newRoute(ev.ID, c.opts.DedupBits)
	for tries := 0; ; tries++ {
		res, stale, err := c.addIn(ctx, l, ev, r, delta, fresh)
		if !stale || fresh && tries >= casAttempts {
			c.count(res, err)
			return res, err
		}
		next, lerr := c.ensureLayout(ctx)
		if lerr != nil {
			return Result{}, lerr
		}
		if fresh && next.ver == l.ver {
			// The layout just read has not moved: what the stripes said contradicts it.
			c.count(res, err)
			return res, err
		}
		// A resize moved the layout on between the read and the add (resizes in quick
		// succession): try again with the newer one.
		l, fresh = next, true
	}
}

// checkAdd validates the input of Add.
func (c *Counter) checkAdd(ev Event, delta int64) error {
	if err := c.checkID(ev.ID); err != nil {
		return err
	}
	if ev.Time.IsZero() || ev.Time.UnixMilli() < 0 {
		return invalidf("Event.Time must be set (after 1970), got %v", ev.Time)
	}
	if delta == 0 {
		return invalidf("delta must not be zero")
	}
	return nil
}

// addIn routes the event through layout l. It reports stale=true when l may be out of date
// and the caller should reload it; when fresh is set, l was just read and such conditions are
// errors instead.
func (c *Counter) addIn(ctx context.Context, l *layout, ev Event, r route, delta int64, fresh bool) (res Result, stale bool, err error) {
	k, err := c.firstGen(l, ev)
	if err != nil {
		return Result{}, true, err
	}
	for ; k < len(l.doc.Gens); k++ {
		g := &l.doc.Gens[k]
		res, skip, err := c.target(l, g, ev, r)
		if skip || err != nil {
			if err != nil {
				return res, false, err
			}
			continue
		}
		res, next, stale, err := c.addTo(ctx, g, res, ev, r, delta)
		if next {
			continue // the stripe closed at or before ev.Time: the next generation takes it
		}
		return res, stale, err
	}
	return Result{}, true, fmt.Errorf("%w: event %q redirected past generation %d", ErrLayout, ev.ID, len(l.doc.Gens))
}

// firstGen returns the index in l of the first generation ev may belong to.
func (c *Counter) firstGen(l *layout, ev Event) (int, error) {
	if ev.Gen == 0 {
		if t := ev.Time.UnixMilli(); t < l.doc.Floor {
			return 0, fmt.Errorf("%w: event time %d ms is before %d ms, the end of sealed generations", ErrTooOld, t, l.doc.Floor)
		}
		return 0, nil
	}
	if l.pruned(ev.Gen) {
		return 0, fmt.Errorf("%w: generation %d is sealed", ErrTooOld, ev.Gen)
	}
	if g := l.gen(ev.Gen); g == nil || g.Pending {
		return 0, fmt.Errorf("%w: %d (newest open generation is %d)", ErrUnknownGeneration, ev.Gen, l.current().Gen)
	}
	return l.index(ev.Gen), nil
}

// target returns ev's stripe in generation g, skip=true if by its time ev belongs to a later
// generation, or ErrTooOld if g is folded.
func (c *Counter) target(l *layout, g *genDoc, ev Event, r route) (res Result, skip bool, err error) {
	i := stripeOf(r.hash, g.Stripes)
	res = Result{Gen: g.Gen, Stripe: i}
	if ev.Gen == 0 && g.Ends != nil && ev.Time.UnixMilli() >= g.Ends[i] {
		return res, true, nil
	}
	if l.isFolded(g.Gen) {
		return res, false, fmt.Errorf("%w: generation %d is sealed", ErrTooOld, g.Gen)
	}
	return res, false, nil
}

// addTo counts ev in stripe res.Stripe of g: through addfast.lua when this Counter has a
// view of the stripe's dedup table for ev's slice, through add.lua when it has none or
// addfast.lua did not take the event.
func (c *Counter) addTo(ctx context.Context, g *genDoc, res Result, ev Event, r route, delta int64) (_ Result, next, stale bool, err error) {
	call := c.addCall(g, res.Stripe, ev, r, delta)
	reply, err := call.Script.Run(ctx, c.client, call.Keys, call.Args...).Result()
	if err == nil && c.notTaken(g, res.Stripe, reply) {
		call = c.fullCall(g, res.Stripe, ev, r, delta)
		reply, err = call.Script.Run(ctx, c.client, call.Keys, call.Args...).Result()
	}
	if err != nil {
		return res, false, false, fmt.Errorf("stripes: add %q to %s: %w", ev.ID, call.Keys[0], err)
	}
	return c.settle(ctx, g, res, ev, delta, call, reply)
}

// addCall returns the call that counts ev in stripe i of g: addfast.lua with this Counter's
// view of the stripe's dedup table for ev's slice and the set the record falls in under it,
// or add.lua if it has no view of that slice.
func (c *Counter) addCall(g *genDoc, i int, ev Event, r route, delta int64) script.Call {
	key, t := c.keys.of(g, i), ev.Time.UnixMilli()
	slice := t / c.opts.sliceMs()
	v, ok := c.views.get(stripeRef{g.Gen, i})
	if !ok || v.slice != slice {
		return c.fullCall(g, i, ev, r, delta)
	}
	check := "0"
	if checksSplit(r.record, c.opts.SetMembers) {
		check = strconv.Itoa((c.opts.SetMembers + 1) / 2)
	}
	return script.Call{Script: addFastScript, Keys: []string{key, setKey(key, slice, v.bucket(selectorOf(r.record)))}, Args: []any{
		r.member, delta, t, c.ringField(slice), strconv.FormatInt(slice, 10) + ":" + v.state(), check,
	}}
}

// fullCall returns the add.lua call that counts ev in stripe i of g.
func (c *Counter) fullCall(g *genDoc, i int, ev Event, r route, delta int64) script.Call {
	explicit := "0"
	if ev.Gen != 0 {
		explicit = "1"
	}
	check := "0"
	if checksSplit(r.record, c.opts.SetMembers) {
		check = "1"
	}
	return script.Call{Script: addScript, Keys: []string{c.keys.of(g, i)}, Args: []any{
		g.Gen, r.member, delta, ev.Time.UnixMilli(), c.opts.DedupWindow.Milliseconds(),
		c.opts.sliceMs(), c.opts.SetMembers, explicit, check,
	}}
}

// ringField returns the field of a stripe hash that holds the state of a slice's dedup
// table (add.lua's ring of 2 windows plus 3 slices).
func (c *Counter) ringField(slice int64) string {
	width := c.opts.sliceMs()
	ring := 2*((c.opts.DedupWindow.Milliseconds()+width-1)/width) + 3
	return "d" + strconv.FormatInt(slice%ring, 10)
}

// notTaken reports whether reply is addfast.lua's "not taken" (the event must go through
// add.lua), and if so forgets the view that did not hold.
func (c *Counter) notTaken(g *genDoc, i int, reply any) bool {
	if code, ok := reply.(int64); ok && code == 0 {
		c.views.drop(stripeRef{g.Gen, i})
		return true
	}
	return false
}

// settle turns the reply of an add call into a result: it keeps the dedup table state that
// add.lua's reply carries as this Counter's view, and splits a table that the call found
// due (see split.lua); a split that fails is left to a later sampled addition.
func (c *Counter) settle(ctx context.Context, g *genDoc, res Result, ev Event, delta int64, call script.Call, reply any) (_ Result, next, stale bool, err error) {
	var codes []int64
	switch v := reply.(type) {
	case int64: // addfast.lua: code + 16 * (1 + L + 32*p) when it teaches the state
		codes = []int64{v % 16, 0}
		if st := v / 16; st > 0 {
			codes = append(codes, (st-1)%32, (st-1)/32)
		}
	case []any: // add.lua
		for _, x := range v {
			n, ok := x.(int64)
			if !ok {
				break
			}
			codes = append(codes, n)
		}
	}
	ref := stripeRef{g.Gen, res.Stripe}
	slice := ev.Time.UnixMilli() / c.opts.sliceMs()
	if len(codes) == 4 && codes[2] >= 0 && codes[2] < 64 && codes[3] >= 0 {
		c.views.put(ref, dedupView{slice: slice, level: uint64(codes[2]), split: uint64(codes[3])})
	}
	if len(codes) >= 2 && codes[0] == addSplitDue {
		codes[0] = addApplied
		if v, ok := c.views.get(ref); ok && v.slice == slice {
			c.split(ctx, call.Keys[0], ref, v)
		}
	}
	return c.interpret(g, res, ev, delta, call.Keys[0], codes)
}

// split runs split.lua on the table of view v's slice in stripe key: one linear-hashing
// step, once per state however many callers saw the table due. The state it replies
// becomes the view.
func (c *Counter) split(ctx context.Context, key string, ref stripeRef, v dedupView) {
	width := c.opts.sliceMs()
	expireAt := (v.slice+1)*width + c.opts.DedupWindow.Milliseconds() + width
	st, err := splitScript.Run(ctx, c.client, []string{key}, v.slice, c.ringField(v.slice), v.state(), expireAt).Int64Slice()
	if err != nil || len(st) != 2 {
		return
	}
	if st[0] < 0 || st[0] >= 64 || st[1] < 0 {
		c.views.drop(ref)
		return
	}
	c.views.put(ref, dedupView{slice: v.slice, level: uint64(st[0]), split: uint64(st[1])})
}

// interpret turns an add.lua reply into a result. next=true sends the event on to the next
// generation; stale=true means the layout may be out of date.
func (c *Counter) interpret(g *genDoc, res Result, ev Event, delta int64, key string, reply []int64) (_ Result, next, stale bool, err error) {
	if len(reply) != 2 && len(reply) != 4 {
		return res, false, false, fmt.Errorf("%w: add.lua replied %v", ErrLayout, reply)
	}
	t := ev.Time.UnixMilli()
	switch reply[0] {
	case addApplied:
		res.Applied = true
		c.stats.stripeWrite(g.Gen, g.Stripes, res.Stripe)
		return res, false, false, nil
	case addDuplicate:
		return res, false, false, nil
	case addSealed:
		return res, false, false, fmt.Errorf("%w: generation %d is sealed", ErrTooOld, g.Gen)
	case addTooOld:
		return res, false, false, fmt.Errorf("%w: event time %d ms, server time %d ms", ErrTooOld, t, reply[1])
	case addTooNew:
		return res, false, false, invalidf("Event.Time %d ms is more than DedupWindow ahead of server time %d ms", t, reply[1])
	case addNext:
		return res, true, false, nil
	case addOverflow:
		return res, false, false, invalidf("delta %d would overflow the int64 value of stripe %d of generation %d", delta, res.Stripe, g.Gen)
	case addNoStripe: // sealed and expired since l was read, or data loss
		return res, false, true, vanishedf("stripe %s of live generation %d is missing", key, g.Gen)
	default: // addWrongGen
		return res, false, true, fmt.Errorf("%w: stripe %s is of generation %d, not %d", ErrLayout, key, reply[1], g.Gen)
	}
}

// count updates the statistics for one Add outcome.
func (c *Counter) count(res Result, err error) {
	switch {
	case err == nil && res.Applied:
		c.stats.applied.Add(1)
	case err == nil:
		c.stats.duplicates.Add(1)
	case errors.Is(err, ErrTooOld):
		c.stats.tooOld.Add(1)
	}
}
