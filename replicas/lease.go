package replicas

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// GetOrLoad returns key's value like Get and, when it has none, loads it from the source
// with load — once for the whole fleet.
//
// A miss costs two round trips: one command on the primary that returns the value or takes
// the key's lease (a token stored in the primary's key while it holds no record, that holds
// the lease for Options.LeaseTTL), then the fill (for a hot key the copy read comes first, and the fill
// also writes the copies); a hit costs the first alone, sent by the caller itself. Callers
// on one instance that need more than that share one fetch, except that a caller arriving while that fetch's read is
// under way starts a fetch of its own (the read may predate a write that returned before
// the caller arrived, and the caller must see that write). When another instance holds the lease, the fetch blocks on a
// wake list the holder pushes to when it fills or gives up (BLPOP, at most until the lease
// ends), then looks again. The lease winner runs load, then fills the primary and its
// registered copies in one script that first checks the lease is still its own: a filler
// whose lease expired and was taken over changes nothing, so a slow filler cannot overwrite
// a newer value. The holder renews its lease every LeaseTTL/3 while it loads and fills, so a
// slow holder keeps it; if the holder dies (or is paused, or cut off from Redis) the lease
// expires LeaseTTL after its last renewal and one waiting caller takes over, with a lease
// of a whole LeaseTTL from the takeover (the server's clock), so the source is loaded once
// more for the fleet, not once per waiter. An instance blocks at most one connection per
// key on the wake list, however many of its callers wait (see awaitWake).
//
// A load that returns ErrNotFound leaves an "absent" record in the lease for
// Options.NegativeTTL, and a load that fails an error record (its text) for Options.ErrorTTL:
// until they end, every GetOrLoad in the fleet answers ErrNotFound, or an error wrapping
// ErrLoadFailed, without loading; a Set in the meantime is read at once.
//
// The fetch runs detached from the callers' cancellation (context.WithoutCancel of the
// first caller's ctx, so its values such as trace spans reach load), bounded by
// Options.LoadTimeout and Close, with the ttl and load of the caller that started it; each
// caller leaves when its own ctx ends. When the bound ends while load still runs (a loader
// that ignores its ctx), the fetch gives the lease up and returns the bound's error at once;
// load's late result is dropped. A fill refused because its lease ended, with no live
// value stored, takes the lease again (after its new holder's fill, if there is one) and
// fills what it loaded under it, so a slower filler cannot take its callers back. If the
// fill is refused because a newer version is stored, the callers get the stored value; when
// it is a live tombstone of the loaded version or a newer one, ErrNotFound (the source lags
// behind a Delete; a newer tombstone also leaves the absent record for
// Options.NegativeTTL); when it is an expired value (a ghost), the loaded value, unstored.
func (r *Replicator) GetOrLoad(ctx context.Context, key string, ttl time.Duration, load Loader) (Item, error) {
	if key == "" {
		return Item{}, errEmptyKey
	}
	if load == nil {
		return Item{}, fmt.Errorf("%w: GetOrLoad needs a loader", ErrInvalid)
	}
	ttl, err := r.checkTTL(ttl)
	if err != nil {
		return Item{}, err
	}
	var lay *layout
	var missed []int
	if r.IsHot(key) {
		if l, err := r.layoutFor(ctx, key); err == nil {
			lay = l
			it, done, m, err := r.readCopies(ctx, key, lay)
			if done && !errors.Is(err, ErrNotFound) {
				return it, err
			}
			missed = m
		}
	}
	var pre *leaseRead
	if lay == nil {
		it, done, p, err := r.readOrLease(ctx, key, ttl)
		if done {
			return it, err
		}
		pre = p
	}
	f, err := r.join(ctx, key, ttl, load, lay, missed, pre)
	if err != nil {
		return Item{}, err
	}
	return f.wait(ctx, key)
}

// flight is one shared fetch of a key on this instance.
type flight struct {
	done chan struct{}
	item Item
	err  error
	// reading is set while a read whose reply may be the answer is under way: a caller
	// arriving then starts a fetch of its own, since that read may predate a write that
	// returned before the caller arrived.
	reading atomic.Bool
}

// wait returns the fetch's result when it is done, or leaves when ctx ends first.
func (f *flight) wait(ctx context.Context, key string) (Item, error) {
	select {
	case <-f.done:
		return f.item, f.err
	case <-ctx.Done():
		return Item{}, fmt.Errorf("replicas: get or load %q: %w", key, ctx.Err())
	}
}

// leaseRead is what the caller's own lease command (see readOrLease) left for the fetch to
// settle: the token it used, and whether it took the lease. A command whose reply was lost
// may have taken it too; the fetch then finds the lease held by that token.
type leaseRead struct {
	token string
	won   bool
	sure  bool // the reply arrived and shows the lease is someone else's unless won
}

// readOrLease runs, in the caller's goroutine and on its ctx, the command a fetch of a key
// that is not hot starts with, "SET <primary> l2,<token>,0 NX GET PX <life>": done reports
// that it settled the call (a live value, or the fleet's absent record); otherwise the
// returned leaseRead goes to the fetch, which holds the lease when it was taken. A hit thus
// costs no goroutine and no shared fetch: it is a read that began after the call did.
func (r *Replicator) readOrLease(ctx context.Context, key string, ttl time.Duration) (Item, bool, *leaseRead, error) {
	token := r.newToken()
	life, _ := r.leaseLife(ttl)
	raw, err := bound.Do(ctx, func() (string, error) {
		return r.client.SetArgs(ctx, r.primaryKey(key), "l2,"+token+",0", redis.SetArgs{Mode: "NX", Get: true, TTL: life}).Result()
	})
	return r.settleRead(raw, err, token)
}

// settleRead is the plan step of readOrLease: from the reply (raw, err) of the command sent
// with token it returns what readOrLease returns.
func (r *Replicator) settleRead(raw string, err error, token string) (Item, bool, *leaseRead, error) {
	switch {
	case errors.Is(err, redis.Nil):
		return Item{}, false, &leaseRead{token: token, won: true, sure: true}, nil
	case err != nil:
		return Item{}, false, &leaseRead{token: token}, nil
	case strings.HasPrefix(raw, magic):
		if rec, ok := decode(raw); ok && !rec.tombstone && rec.live(r.opts.Clock().UnixMilli()) {
			return Item{Value: []byte(rec.data), Version: rec.version}, true, nil, nil
		}
	case strings.HasPrefix(raw, "n2,"):
		r.stats.negativeHits.Add(1)
		r.stats.misses.Add(1)
		return Item{}, true, nil, ErrNotFound
	case ownMarker(raw, token):
		// go-redis sent the command again after the first attempt's reply was lost, and
		// that attempt took the lease: it is this caller's, as if the reply had arrived.
		// Joined to a fetch already waiting here, the caller would leave its lease to run
		// out; and GetOrLoadMany loads the key with the batch's other won keys, in one call.
		return Item{}, false, &leaseRead{token: token, won: true, sure: true}, nil
	}
	return Item{}, false, &leaseRead{token: token, sure: true}, nil
}

// ownMarker reports whether raw is a lease marker "l2,<token>,<waiters>" held by token's
// holder: the same <id>, as the scripts compare them (see newToken).
func ownMarker(raw, token string) bool {
	held, ok := strings.CutPrefix(raw, "l2,")
	if !ok {
		return false
	}
	held, _, _ = strings.Cut(held, ",")
	held, _, _ = strings.Cut(held, ".")
	id, _, _ := strings.Cut(token, ".")
	return held == id
}

// join returns the key's fetch in flight, starting one if there is none. A caller that
// holds the lease, or may (pre not sure), starts a fetch of its own, which fills under it.
func (r *Replicator) join(ctx context.Context, key string, ttl time.Duration, load Loader, lay *layout, missed []int, pre *leaseRead) (*flight, error) {
	r.flightMu.Lock()
	defer r.flightMu.Unlock()
	mine := pre != nil && (pre.won || !pre.sure)
	if f := r.flights[key]; f != nil && !f.reading.Load() && !mine {
		return f, nil
	}
	if r.lifetime.Err() != nil {
		return nil, ErrClosed
	}
	f := &flight{done: make(chan struct{})}
	r.flights[key] = f
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.LoadTimeout)
		stop := context.AfterFunc(r.lifetime, cancel)
		f.item, f.err = r.fetch(ctx, f, key, ttl, load, lay, missed, pre)
		stop()
		cancel()
		if f.err != nil && r.lifetime.Err() != nil {
			f.err = fmt.Errorf("replicas: get or load %q: %w", key, ErrClosed)
		}
		r.flightMu.Lock()
		if r.flights[key] == f {
			delete(r.flights, key)
		}
		r.flightMu.Unlock()
		close(f.done)
	}()
	return f, nil
}

// newToken returns a lease token "<id>.<deadline>": a lease the plain command takes with it
// lasts until the deadline, LeaseTTL from now on the system clock (not Options.Clock, which
// only reads records), even when its marker lives longer (see leaseLife); a lease acquire.lua
// takes gets its deadline from the server's clock instead, and renew.lua moves it on while
// the holder works. The scripts know a holder by <id> alone. The id is drawn from
// crypto/rand, not Options.Rand: instances whose Rand is seeded alike must still never share
// a lease. Draw a token right before the command that may take a lease with it.
func (r *Replicator) newToken() string {
	return rand.Text() + "." + strconv.FormatInt(time.Now().Add(r.opts.LeaseTTL).UnixMilli(), 10)
}

// leaseLife returns how long a lease marker taken in the primary lives, and whether that is
// the value's life ttl: then the fill swaps the marker for the record in one write that
// keeps the key's TTL (see set.lua), so a miss costs the lease command and a fill of one
// write. A ttl shorter than LeaseTTL would end the lease before its deadline: such a lease
// lives LeaseTTL and its fill sets the TTL itself.
func (r *Replicator) leaseLife(ttl time.Duration) (time.Duration, bool) {
	if ttl >= r.opts.LeaseTTL {
		return ttl, true
	}
	return r.opts.LeaseTTL, false
}

// fetch takes the lease or waits for its holder, then loads and fills. It registers the
// copies in missed at the primary when it finds a value there, and refills them.
//
// A key that is not hot starts with one plain command, "SET <primary> l2,<token>,0 NX GET
// PX <life>" (see leaseLife): it returns the live record (a hit), or nothing (the lease is taken, in the
// primary's own key). Whatever else it finds (another holder's lease, an expired record, a
// tombstone, an absent or error marker) goes through acquire.lua, as does a hot key's
// fallback, which also registers its copies.
//
// With pre, the caller already ran that command with pre's token: the fetch starts from its
// outcome, the lease won, or else acquire.lua (which also recognizes a lease pre's command
// took without its reply arriving).
//
// fetch is the lease's state machine: each turn reads the state (judgePlain is the plan step
// of the plain command) and acts on it: found answers from what is stored, "wait" blocks
// until the holder is done, won loads and fills, and a lease lost before the fill goes round
// again with what was loaded.
func (r *Replicator) fetch(ctx context.Context, f *flight, key string, ttl time.Duration, load Loader, lay *layout, missed []int, pre *leaseRead) (Item, error) {
	lt := r.newLeaseTurn(key, ttl, lay, missed, pre)
	waited := false
	var loaded *Item // what this fetch loaded, when its lease ended before the fill
	for {
		f.reading.Store(true)
		res, err := r.readLease(ctx, key, lt)
		if err != nil {
			return Item{}, err
		}
		state, _ := res[0].(string)
		if state == "wait" || state == "won" {
			// What the fetch answers now comes from a later read, or from the fill.
			f.reading.Store(false)
		}
		switch state {
		case "hit", "absent", "error":
			return r.found(ctx, key, lay, missed, state, res)
		case "wait":
			if err := r.waitHolder(ctx, key, lt.wake, res, !waited); err != nil {
				return Item{}, err
			}
			waited, lt.scripted = true, lay != nil
		case "won":
			if tok, ok := res[len(res)-1].(string); ok && len(res) > 1 {
				lt.token = tok // the lease's deadline, set by the server (see acquire.lua)
			}
			it, err := r.won(ctx, key, lt.token, ttl, load, loaded, waited)
			if !errors.Is(err, errLeaseLost) {
				return it, err
			}
			// The lease ended while loading and nothing stored decides: take the lease
			// again (or wait for its new holder) and fill what was loaded under it, so
			// the callers are never handed a value the key does not hold.
			loaded, lt.token, lt.scripted = &it, r.newToken(), lay != nil
		default:
			return Item{}, fmt.Errorf("replicas: lease for %q: unexpected reply %v", key, res)
		}
	}
}

// waitHolder is the step of a fetch that found the lease held by someone else (res is
// acquire.lua's {"wait", pttl}): it blocks until the holder is done or the lease's life
// passes (see awaitWake). first counts the fetch's first wait in Stats.
func (r *Replicator) waitHolder(ctx context.Context, key, wake string, res []any, first bool) error {
	if first {
		r.stats.leaseWaits.Add(1)
	}
	pttl, _ := res[1].(int64)
	if err := r.awaitWake(ctx, wake, time.Duration(pttl)*time.Millisecond); err != nil {
		return fmt.Errorf("replicas: waiting for the fill of %q: %w", key, err)
	}
	return nil
}

// leaseTurn is what a fetch's turns share: the keys and arguments of its lease commands, the
// token it asks with, and how the next turn reads the lease.
type leaseTurn struct {
	token   string
	primary string
	keys    []string // primary, side lease
	wake    string
	leaseMs int64
	life    time.Duration // the life of a lease taken in the primary (see leaseLife)
	add     string        // copies to register (acquire.lua's ARGV[3])
	// scripted sends the next turn to acquire.lua rather than the plain command: a hot key
	// (it registers copies), a turn after the caller's own command (pre), and a turn after
	// a wait, for a hot key.
	scripted bool
	pre      *leaseRead // the caller's own lease command, for the first turn only
}

// newLeaseTurn returns the first turn of a fetch of key; pre's token, when pre is set, is
// the one the fetch asks with.
func (r *Replicator) newLeaseTurn(key string, ttl time.Duration, lay *layout, missed []int, pre *leaseRead) *leaseTurn {
	lt := &leaseTurn{token: r.newToken(), primary: r.primaryKey(key), leaseMs: r.opts.LeaseTTL.Milliseconds(), pre: pre}
	if pre != nil {
		lt.token = pre.token
	}
	side, wake := r.leaseKeys(key)
	lt.keys, lt.wake = []string{lt.primary, side}, wake
	lt.life, _ = r.leaseLife(ttl)
	if len(missed) > 0 {
		lt.add = slotsOf(lay, missed)
	}
	lt.scripted = lay != nil || pre != nil
	return lt
}

// readLease reads the lease state for one turn of a fetch, as acquire.lua's reply: {"won"}
// when the caller's own command took the lease, else the plain command's when it settles
// the turn alone (see judgePlain), else acquire.lua's.
func (r *Replicator) readLease(ctx context.Context, key string, lt *leaseTurn) ([]any, error) {
	pre := lt.pre
	lt.pre = nil
	if pre != nil && pre.won {
		return []any{"won"}, nil
	}
	if !lt.scripted {
		// A lease this command takes lasts LeaseTTL from now, not from when the call began.
		lt.token = r.newToken()
		raw, err := bound.Do(ctx, func() (string, error) {
			return r.client.SetArgs(ctx, lt.primary, "l2,"+lt.token+",0", redis.SetArgs{Mode: "NX", Get: true, TTL: lt.life}).Result()
		})
		res, err := judgePlain(raw, err, lt.token, r.opts.Clock)
		if err != nil {
			return nil, fmt.Errorf("replicas: lease for %q: %w", key, err)
		}
		if res != nil {
			return res, nil
		}
	}
	// A hot key, or what the plain command cannot settle alone.
	res, err := acquireScript.Run(ctx, r.client, lt.keys, lt.token, lt.leaseMs, lt.add, lt.life.Milliseconds()).Slice()
	if err != nil {
		return nil, fmt.Errorf("replicas: lease for %q: %w", key, err)
	}
	return res, nil
}

// judgePlain is the plan step of the plain lease command "SET <primary> l2,<token>,0 NX GET
// PX <life>": from its reply (raw, err) it returns the reply acquire.lua would give when the
// command settles the fetch alone ({"won"}: the lease is this token's; {"hit", raw}: a live
// value; {"absent"}: an absent marker), nil when it cannot (acquire.lua decides), or the
// command's error. It reads clock only to judge a stored record's life.
func judgePlain(raw string, err error, token string, clock func() time.Time) ([]any, error) {
	switch {
	case errors.Is(err, redis.Nil) || raw == "l2,"+token+",0":
		return []any{"won"}, nil
	case err != nil:
		return nil, err
	case strings.HasPrefix(raw, magic):
		if rec, ok := decode(raw); ok && !rec.tombstone && rec.live(clock().UnixMilli()) {
			return []any{"hit", raw}, nil
		}
	case strings.HasPrefix(raw, "n2,"):
		return []any{"absent"}, nil
	}
	return nil, nil
}

// found answers a fetch from what the primary holds: state "hit" (res[1] is the record; the
// copies in missed are refilled from it), "absent" (ErrNotFound) or "error" (res[1] is the
// message another instance's failed load left: ErrLoadFailed).
func (r *Replicator) found(ctx context.Context, key string, lay *layout, missed []int, state string, res []any) (Item, error) {
	switch state {
	case "hit":
		raw, _ := res[1].(string)
		rec, ok := decode(raw)
		if !ok {
			return Item{}, fmt.Errorf("replicas: get %q: %w", key, ErrCorrupt)
		}
		if len(missed) > 0 {
			r.fill(ctx, key, lay, missed, rec)
		}
		return Item{Value: []byte(rec.data), Version: rec.version}, nil
	case "absent":
		r.stats.negativeHits.Add(1)
		r.stats.misses.Add(1)
		return Item{}, ErrNotFound
	default:
		msg, _ := res[1].(string)
		r.stats.errorHits.Add(1)
		return Item{}, fmt.Errorf("replicas: loading %q failed on another instance: %s: %w", key, msg, ErrLoadFailed)
	}
}

// won is the step of a fetch holding the lease: it loads and fills, or, when loaded holds
// what an earlier lease of this fetch loaded before it ended, fills that. waited says the
// fetch waited for another holder first (a takeover). errLeaseLost means the lease ended
// before the fill and nothing stored decides.
func (r *Replicator) won(ctx context.Context, key, token string, ttl time.Duration, load Loader, loaded *Item, waited bool) (Item, error) {
	if loaded != nil {
		return r.fillLoaded(ctx, key, token, ttl, *loaded)
	}
	r.stats.misses.Add(1)
	r.stats.leaseWins.Add(1)
	if waited {
		r.stats.leaseTakeovers.Add(1)
	}
	stop := r.keepLease(ctx, key, token)
	defer stop()
	return r.loadAndFill(ctx, key, token, ttl, load)
}

// keepLease renews the lease held with token every LeaseTTL/3 (see renew.lua) until the
// returned stop is called, so that a holder alive but slow — a long load, a fill waiting for
// a connection on a loaded machine — keeps its lease: only a holder that stops renewing
// (dead, paused, cut off from Redis) is taken over. The fill and the release know the holder
// by its token's id, which renewals keep. Renewal stops when the lease turns out lost.
func (r *Replicator) keepLease(ctx context.Context, key, token string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(r.opts.LeaseTTL/3, time.Millisecond))
		defer t.Stop()
		side, _ := r.leaseKeys(key)
		keys := []string{r.primaryKey(key), side}
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			res, err := renewScript.Run(ctx, r.client, keys, token, r.opts.LeaseTTL.Milliseconds()).Slice()
			if err == nil && len(res) > 0 && res[0] == "lost" {
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// pollWait is how long a waiting fetch that finds no connection free to block on waits
// before it looks at the lease again.
const pollWait = 20 * time.Millisecond

// blockingLimit is how many BLPOPs a Replicator over client runs at once: half the pool of
// its client (of each node's, on a cluster), at least 1.
func blockingLimit(client redis.UniversalClient) int {
	size := 0
	switch c := client.(type) {
	case *redis.Client:
		size = c.Options().PoolSize
	case *redis.ClusterClient:
		size = c.Options().PoolSize
	}
	if size <= 0 {
		size = 10 * runtime.GOMAXPROCS(0)
	}
	return max(size/2, 1)
}

// maxBlock bounds one BLPOP of a waiting fetch, so that Close and LoadTimeout are never held
// up longer by a blocked connection.
const maxBlock = time.Second

// blockCap is the longest BLPOP a Replicator over client sends: maxBlock, or half the
// client's ReadTimeout if that is shorter. The BLPOP is sent once (onceCmd), with no read
// timeout of its own, so the client's bounds its read; a block that outlived it would fail
// as a read timeout, and go-redis would close the connection, on every wait.
func blockCap(client redis.UniversalClient) time.Duration {
	rt := time.Duration(0)
	switch c := client.(type) {
	case *redis.Client:
		rt = c.Options().ReadTimeout
	case *redis.ClusterClient:
		rt = c.Options().ReadTimeout
	}
	if rt <= 0 { // as go-redis's client keeps it: no read deadline
		return maxBlock
	}
	return max(min(rt/2, maxBlock), time.Millisecond)
}

// wakeWait is the one blocking read of a wake list under way on this instance: every other
// fetch here that waits for the same holder waits for it to return.
type wakeWait struct{ done chan struct{} }

// awaitWake blocks until the lease holder pushes onto wake (it filled or gave up) or the
// lease's remaining life d (at most maxBlock) passes. An error of the blocking read is not
// fatal: the caller looks at the lease again.
//
// An instance blocks one connection per wake list, however many of its fetches wait on it:
// the first sends BLPOP and the others wait for it to return; and at most half its client's
// pool (blockingLimit) in all, however many keys it waits for (a GetOrLoadMany): a wait
// that finds them taken looks at the lease again after pollWait. So waiters never hold the
// pool's connections that a holder on this instance needs to renew, fill and release its
// lease (a BLPOP holds its connection for up to maxBlock). The filler pushes one element per waiter it
// counted, so the elements left over wake a later wait on that list (within the list's
// life, max(LeaseTTL, 1s)) at once: that wait looks at the lease again and waits again.
func (r *Replicator) awaitWake(ctx context.Context, wake string, d time.Duration) error {
	d = min(max(d, time.Millisecond), r.blockCap)
	r.wakeMu.Lock()
	if w := r.wakes[wake]; w != nil {
		r.wakeMu.Unlock()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-w.done:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	w := &wakeWait{done: make(chan struct{})}
	r.wakes[wake] = w
	r.wakeMu.Unlock()
	defer func() {
		r.wakeMu.Lock()
		delete(r.wakes, wake)
		r.wakeMu.Unlock()
		close(w.done)
	}()
	select {
	case r.blocking <- struct{}{}:
		defer func() { <-r.blocking }()
	default:
		// Half the pool already blocks on other keys' wake lists: look again soon.
		t := time.NewTimer(min(d, pollWait))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		return nil
	}
	_, err := bound.Do(ctx, func() (struct{}, error) {
		cmd := onceCmd{redis.NewCmd(ctx, "blpop", wake, fmt.Sprintf("%.3f", d.Seconds()))}
		_ = r.client.Process(ctx, cmd)
		return struct{}{}, cmd.Err()
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		// Do not spin on a failing connection.
		t := time.NewTimer(min(d, 50*time.Millisecond))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// onceCmd is a command go-redis sends once, never again after an error. A wake's BLPOP
// must not be resent: one whose reply was lost has popped its element, and a resend would
// block for its whole timeout (up to maxBlock) after the holder woke it. Its error sends the
// waiter back to the lease, which shows the fill. The read is bounded by the client's
// ReadTimeout, not by the BLPOP's: blockCap keeps the block under it.
type onceCmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to resend the command.
func (onceCmd) NoRetry() bool { return true }

// maxErrorText bounds the text of an error record.
const maxErrorText = 512

// loadAndFill runs load under the lease held with token and fills the key. When ctx ends
// before load returns, it gives the lease up and returns at once; the loader's late result
// is dropped.
func (r *Replicator) loadAndFill(ctx context.Context, key, token string, ttl time.Duration, load Loader) (Item, error) {
	type result struct {
		it  Item
		err error
	}
	done := make(chan result, 1)
	go func() {
		it, err := callLoader(ctx, key, load)
		done <- result{it, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		r.release(ctx, key, token, "f", r.opts.LeaseTTL, "")
		return Item{}, fmt.Errorf("replicas: loading %q: %w", key, ctx.Err())
	}
	if res.err != nil {
		if errors.Is(res.err, ErrNotFound) {
			if r.opts.NegativeTTL > 0 {
				r.release(ctx, key, token, "n", r.opts.NegativeTTL, "")
			} else {
				r.release(ctx, key, token, "f", r.opts.LeaseTTL, "")
			}
			return Item{}, ErrNotFound
		}
		if r.opts.ErrorTTL > 0 {
			msg := res.err.Error()
			if len(msg) > maxErrorText {
				msg = msg[:maxErrorText]
			}
			r.release(ctx, key, token, "e", r.opts.ErrorTTL, msg)
		} else {
			r.release(ctx, key, token, "f", r.opts.LeaseTTL, "")
		}
		return Item{}, fmt.Errorf("replicas: loading %q: %w: %w", key, ErrLoadFailed, res.err)
	}
	return r.fillLoaded(ctx, key, token, ttl, res.it)
}

// callLoader calls load and turns a panic into an error.
func callLoader(ctx context.Context, key string, load Loader) (it Item, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("replicas: loader of %q panicked: %v\n%s", key, p, debug.Stack())
		}
	}()
	return load(ctx, key)
}

// release marks the lease held with token (mode "f" free, "n" absent, "e" failed with msg)
// for d and wakes the waiters. It runs even when ctx has ended, bounded by a second.
func (r *Replicator) release(ctx context.Context, key, token, mode string, d time.Duration, msg string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	side, wake := r.leaseKeys(key)
	_ = releaseScript.Run(ctx, r.client, []string{r.primaryKey(key), side, wake}, token, mode, d.Milliseconds(), msg).Err()
}

// errLeaseLost reports a fill refused because its lease ended, with no live record stored
// to answer instead: fetch takes the lease again and fills the loaded item under it.
var errLeaseLost = errors.New("replicas: the fill lease ended before the fill")

// fillLoaded writes a loaded item to the primary under the lease, then to the copies.
func (r *Replicator) fillLoaded(ctx context.Context, key, token string, ttl time.Duration, it Item) (Item, error) {
	var lay *layout
	add := ""
	if r.IsHot(key) {
		if lay, _ = r.layoutFor(ctx, key); lay != nil {
			add = lay.add
		}
	}
	rec := record{version: it.Version, data: string(it.Value)}
	_, keep := r.leaseLife(ttl)
	status, stored, waitErr, err := r.setPrimary(ctx, key, rec, ttl, add, token, keep)
	if err != nil {
		return it, fmt.Errorf("replicas: filling %q: %w", key, err)
	}
	switch status {
	case setSuperseded, setStale:
		r.stats.fillsRefused.Add(1)
		out, err := refusedFill(status, stored, it, r.opts.Clock().UnixMilli())
		if errors.Is(err, ErrNotFound) {
			r.stats.misses.Add(1)
		}
		return out, err
	case setConflict:
		r.stats.fillsRefused.Add(1)
		r.stats.conflicts.Add(1)
		return Item{}, fmt.Errorf("replicas: filling %q version %d: other content of that version is stored: %w", key, it.Version, ErrConflict)
	}
	// The copies are a cache of the primary: a failed copy is refilled by a later read.
	_ = r.writeCopies(ctx, key, stored, r.targets(key, stored, lay), 1)
	if waitErr != nil {
		return it, fmt.Errorf("replicas: filling %q: %w", key, waitErr)
	}
	return it, nil
}

// refusedFill is the plan step of a fill of the loaded item it that set.lua refused with
// status setSuperseded (the lease ended) or setStale (a newer version is stored): from the
// record stored (stored.none when there is none) and the time now (Unix ms) it returns what
// the callers get. A live newer value wins over the loaded one; a live tombstone of the
// loaded version or a newer one answers ErrNotFound (the source lags behind the Delete:
// serving the value would resurrect it); otherwise a superseded fill returns errLeaseLost
// (fetch takes the lease again and fills it under it), and a stale one the loaded value,
// unstored.
func refusedFill(status string, stored record, it Item, now int64) (Item, error) {
	live := !stored.none && stored.live(now)
	switch {
	case live && !stored.tombstone:
		return Item{Value: []byte(stored.data), Version: stored.version}, nil
	case live && stored.version >= it.Version:
		return Item{}, ErrNotFound
	case status == setSuperseded:
		return it, errLeaseLost
	}
	return it, nil
}
