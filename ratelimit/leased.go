package ratelimit

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/hashing"
)

// lease is the Leased-mode part of a key's local state: the chunk this instance holds.
type lease struct {
	left      int64     // cells left in the chunk
	deadline  time.Time // the chunk is usable strictly before this instant (local clock)
	window    int64     // the server's sub-window index the chunk's cells were granted in
	asked     int64     // cells requested (admitted or not) since the last fetch
	fetchedAt time.Time
	rate      float64     // admissions per second, smoothed
	emptyTill []time.Time // per slot: no budget before this instant
	probing   []bool      // per slot: a chunk request left after SlotTimeout still runs
	down      []bool      // per slot: its last request failed (emptyTill is then a back-off)
	next      int         // slot to ask first
	starved   bool        // the last fetch found every slot empty
}

// useChunk admits n from st's chunk if it is live at now. The caller holds st.mu.
func (st *keyState) useChunk(now time.Time, n int64) (int64, bool) {
	if st.left >= n && now.Before(st.deadline) {
		st.left -= n
		return st.left, true
	}
	return 0, false
}

// leased admits n for key from this instance's chunk, taking a new chunk from a budget slot
// when the chunk is spent or expired. Only one goroutine per key per instance talks to
// Redis at a time; the others wait for it and then use its chunk.
func (l *Limiter) leased(ctx context.Context, key string, n int64) (Result, error) {
	return l.leasedOn(ctx, l.state(key), key, n)
}

// leasedOn is leased on key's local state st.
func (l *Limiter) leasedOn(ctx context.Context, st *keyState, key string, n int64) (Result, error) {
	if r, ok := l.fromChunk(st, key, n, true); ok {
		return r, nil
	}
	if err := st.enter(ctx); err != nil {
		return Result{RetryAfter: -1}, err
	}
	defer st.leave()
	if r, ok := l.fromChunk(st, key, n, false); ok {
		return r, nil
	}
	return l.fetch(ctx, st, key, n)
}

// fromChunk admits n from st's chunk, or reports that it cannot; ask counts the request
// in the demand that sizes the next chunk and in the requests the next chunk request
// reports for the fleet's rate estimate.
func (l *Limiter) fromChunk(st *keyState, key string, n int64, ask bool) (Result, bool) {
	st.mu.Lock()
	if ask {
		st.asked += n
		st.unreported++
	}
	now := l.o.Clock() // after the lock: never earlier than the chunk's installation
	left, ok := st.useChunk(now, n)
	st.mu.Unlock()
	if !ok {
		return Result{}, false
	}
	l.admitted(key, now, n)
	return Result{Allowed: true, Remaining: left, RetryAfter: -1}, true
}

// fetch takes a chunk of at least n cells, trying the slots in turn from st.next and
// skipping those known to be empty or unreachable, and admits n from it. It returns an
// error only when no slot it asked answered. After a fetch that found every
// slot empty, the next asks one slot only (the next in turn): at saturation each instance
// then probes once per refill instead of once per slot, and the instances, starting at
// different slots, still cover them all. A grant that arrives after its sub-window ended
// (asked in the last moment of one) is asked again, in the next. A denial always carries a
// positive RetryAfter. The caller holds st's turn.
func (l *Limiter) fetch(ctx context.Context, st *keyState, key string, n int64) (Result, error) {
	now := l.o.Clock()
	st.mu.Lock()
	want, start, tries := l.planFetch(st, now, n)
	st.mu.Unlock()

	f := fetchTry{retry: -1}
	// Slots skipped without a call (known empty or unreachable) do not count as tries.
	for i := 0; i < l.o.Slots && f.asked < tries; i++ {
		j := (start + i) % l.o.Slots
		res, ok := l.trySlot(ctx, st, key, j, want, n, &f)
		if ok {
			return res, nil
		}
		if f.late && f.again < maxLateAgain {
			f.again++
			f.asked--
			i-- // the same slot, in its next sub-window
		}
		f.late = false
		if err := ctx.Err(); err != nil {
			return Result{RetryAfter: -1}, err
		}
	}
	if f.lastErr != nil && !f.answered && !f.known {
		return Result{RetryAfter: -1}, f.lastErr
	}
	st.mu.Lock()
	st.starved = true
	st.mu.Unlock()
	if f.retry <= 0 {
		f.retry = ms(l.sub) // no slot said when: its sub-window's length
	}
	return Result{RetryAfter: f.retry}, nil
}

// probeLimit is how many SlotTimeouts a chunk request left after SlotTimeout may still run
// (with a client whose options end it sooner, it ends sooner).
const probeLimit = 20

// maxLateAgain bounds how many times one fetch asks a slot again after a grant that arrived
// after its sub-window ended.
const maxLateAgain = 8

// planFetch sizes the next chunk and chooses the slots to ask: every slot from st.next, or,
// after a fetch that found every slot empty, only the next one in turn. The caller holds
// st.mu.
func (l *Limiter) planFetch(st *keyState, now time.Time, n int64) (want int64, start, tries int) {
	if st.emptyTill == nil {
		st.emptyTill = make([]time.Time, l.o.Slots)
		st.probing = make([]bool, l.o.Slots)
		st.down = make([]bool, l.o.Slots)
		st.next = int(hashing.Sum64(l.inst) % uint64(l.o.Slots)) // instances start apart
	}
	want = l.want(st, now, n)
	start, tries = st.next, l.o.Slots
	if st.starved {
		start, tries = (st.next+1)%l.o.Slots, 1
		st.next = start
	}
	return want, start, tries
}

// fetchTry is what one fetch learned from the slots it asked so far.
type fetchTry struct {
	retry    time.Duration // the earliest a slot has budget again (-1: unknown)
	lastErr  error         // the last slot's error
	answered bool          // some slot answered
	known    bool          // some slot was skipped as known to be empty
	asked    int           // slots asked
	late     bool          // the last slot's grant arrived after its sub-window ended
	again    int           // slots asked again after a late grant
}

// earlier lowers the retry hint to d.
func (f *fetchTry) earlier(d time.Duration) {
	if f.retry < 0 || d < f.retry {
		f.retry = d
	}
}

// trySlot asks slot j for a chunk of want cells (at least n), unless it is known to be empty
// or a request to it left after SlotTimeout still runs, and admits n from the chunk it
// grants. It records in f what it learned.
func (l *Limiter) trySlot(ctx context.Context, st *keyState, key string, j int, want, n int64, f *fetchTry) (Result, bool) {
	if l.skipSlot(st, key, j, f) {
		return Result{}, false
	}
	f.asked++
	var hits int64
	if l.o.HotRate > 0 {
		// The requests since the last chunk request are reported once, to the first slot
		// this fetch asks (a reply lost on every attempt loses them: an estimate).
		st.mu.Lock()
		hits, st.unreported = st.unreported, 0
		st.mu.Unlock()
	}
	sent := l.o.Clock()
	id := l.requestID()
	r, err := l.takeSlot(ctx, st, key, j, min(want, l.o.budget(j)), n, id, hits)
	if err != nil {
		// A slot whose master is unreachable is skipped for one sub-window from now (or,
		// when it did not answer within SlotTimeout, until its request ends); the others
		// still serve. Its budget is lost meanwhile (under-admission only), and so is
		// whatever this request was granted if it ran and every reply to it was lost.
		if l.onAbandon != nil {
			l.onAbandon(j, id)
		}
		f.lastErr = err
		f.asked-- // an unreachable slot is not a try: the next one is asked
		l.markEmpty(st, j, l.o.Clock(), l.sub, 0)
		st.mu.Lock()
		st.down[j] = true
		st.mu.Unlock()
		return Result{}, false
	}
	f.answered = true
	st.mu.Lock()
	st.down[j] = false
	st.mu.Unlock()
	if l.o.HotRate > 0 {
		l.heat(st, r)
	}
	if r.status == "empty" {
		l.markEmpty(st, j, sent, r.ms, r.resetMs)
		if r.ms >= 0 {
			f.earlier(ms(r.ms))
		}
		return Result{}, false
	}
	res, ok := l.install(st, key, j, sent, r, n)
	if f.late = !ok; f.late {
		l.stats.lateGrants.Add(1)
	}
	return res, ok
}

// skipSlot tells whether slot j is to be skipped now: known to be empty (f learns when it
// has budget again), or its master did not answer a recent request (f notes the error).
func (l *Limiter) skipSlot(st *keyState, key string, j int, f *fetchTry) bool {
	now := l.o.Clock()
	st.mu.Lock()
	skip := now.Before(st.emptyTill[j])
	if skip && !st.down[j] {
		f.earlier(st.emptyTill[j].Sub(now))
		f.known = true
	}
	probing, down := st.probing[j], skip && st.down[j]
	st.mu.Unlock()
	if (probing || down) && f.lastErr == nil {
		f.lastErr = fmt.Errorf("ratelimit: take %q slot %d: its master did not answer a recent request", key, j)
	}
	return skip || probing
}

// takeSlot runs take for slot j, waiting at most SlotTimeout for it (and never past ctx):
// a request still running then is left to finish by itself, slot j is skipped until it
// does, and its grant, if any, is never spent (under-admission only).
func (l *Limiter) takeSlot(ctx context.Context, st *keyState, key string, j int, want, n int64, id string, hits int64) (takeReply, error) {
	if l.o.SlotTimeout < 0 {
		return l.take(ctx, key, j, want, n, id, hits)
	}
	wait, cancel := context.WithTimeout(ctx, l.o.SlotTimeout)
	defer cancel()
	// The request outlives the caller's wait and its ctx (the caller moves on, and its
	// cancel must not end the request early, or the next caller would wait for the same
	// silent master again): it runs until the master answers or probeLimit passes, and slot
	// j is skipped while it runs. A wait that ended before the request started never runs
	// it, and so never marks the slot.
	r, err := bound.Call(wait, func() (takeReply, error) {
		probe, stop := context.WithTimeout(context.WithoutCancel(ctx), probeLimit*l.o.SlotTimeout)
		st.mu.Lock()
		st.probing[j] = true
		st.mu.Unlock()
		defer func() {
			stop()
			st.mu.Lock()
			st.probing[j] = false
			st.mu.Unlock()
		}()
		return l.take(probe, key, j, want, n, id, hits)
	}, nil)
	if err == nil || ctx.Err() != nil || wait.Err() == nil {
		return r, err
	}
	l.stats.slotTimeouts.Add(1)
	return r, fmt.Errorf("ratelimit: take %q slot %d: no reply within Options.SlotTimeout (%v): %w",
		key, j, l.o.SlotTimeout, err)
}

// markEmpty records that slot j has no budget for at least wait ms after from.
func (l *Limiter) markEmpty(st *keyState, j int, from time.Time, wait, reset int64) {
	if wait < 0 {
		wait = max(reset, l.sub)
	}
	st.mu.Lock()
	st.emptyTill[j] = from.Add(ms(wait))
	st.mu.Unlock()
}

// install makes the grant r of slot j, requested at sent, st's chunk and admits n from it.
// The chunk's deadline is sent + r.ms - 1ms: the sub-window ended no earlier than that on the
// server's clock, since the server read its clock after sent. A grant whose sub-window has
// passed by now is dropped (under-admission, never over-admission).
func (l *Limiter) install(st *keyState, key string, j int, sent time.Time, r takeReply, n int64) (Result, bool) {
	l.stats.chunks.Add(1)
	l.stats.cells.Add(uint64(r.granted))
	if l.onGrant != nil {
		l.onGrant(r.nowMs, r.granted)
	}
	// The server counts its time in whole milliseconds (rounded down), so its sub-window may
	// end up to 1ms before sent + r.ms: the chunk stops 1ms earlier.
	deadline := sent.Add(ms(r.ms) - time.Millisecond)
	if r.ms <= 1 {
		deadline = sent
	}
	// The grant's sub-window on the server: the reply's ms runs to that sub-window's end.
	window := (r.nowMs+r.ms)/l.sub - 1
	st.mu.Lock()
	defer st.mu.Unlock()
	now := l.o.Clock()
	st.addChunk(now, deadline, window, r.granted)
	st.asked, st.fetchedAt, st.next, st.starved = 0, now, j, false
	left, ok := st.useChunk(now, n)
	if !ok {
		return Result{}, false
	}
	l.admitted(key, now, n)
	return Result{Allowed: true, Remaining: left, RetryAfter: -1}, true
}

// addChunk adds granted cells of the server's sub-window window, usable before deadline, to
// the chunk, and updates the demand rate from the cells asked since the last fetch (pure:
// tested without Redis). The caller holds the key's lock.
func (ls *lease) addChunk(now, deadline time.Time, window, granted int64) {
	if ls.left > 0 && now.Before(ls.deadline) && ls.window == window && !ls.deadline.After(deadline) {
		// The same sub-window: the old deadline is the earlier one. Cells of a later
		// sub-window are never added to a chunk of an earlier one, however close their
		// local deadlines (a reply delayed on a loaded machine brings them close), since
		// spending them early would put them in a window that already had its budget.
		ls.left += granted
	} else {
		ls.left = granted
		ls.deadline = deadline
		ls.window = window
	}
	if !ls.fetchedAt.IsZero() {
		if dt := now.Sub(ls.fetchedAt).Seconds(); dt > 0 {
			ls.rate = 0.5*ls.rate + 0.5*float64(ls.asked)/dt
		}
	}
}

// want sizes the next chunk: this instance's recent request rate for the key (admitted or
// not: demand, not what it got) times what is left of the current sub-window (on the local
// clock), between n and MaxChunk. A first or idle fetch asks for n. The caller holds st.mu.
func (l *Limiter) want(st *keyState, now time.Time, n int64) int64 {
	rate := st.rate
	if !st.fetchedAt.IsZero() {
		if dt := now.Sub(st.fetchedAt).Seconds(); dt > 0 {
			rate = 0.5*rate + 0.5*float64(st.asked)/dt
		}
	}
	leftMs := l.sub - now.UnixMilli()%l.sub
	w := int64(math.Ceil(rate * float64(leftMs) / 1000))
	return max(n, min(w, l.o.MaxChunk))
}
