package ratelimit

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// approx is the Approximate-mode part of a key's local state.
type approx struct {
	est      int64   // shared count of the window ending at sub-window estIdx, at the last sync
	estIdx   int64   // server sub-window index of est
	counts   []count // admissions not yet synced, per sub-window
	unsynced int64   // sum of counts
	lastSync time.Time
	pending  *syncReq // a sync whose outcome is unknown; sent again, unchanged, first
	// offset is the server's clock minus this instance's, in milliseconds. A sync bounds it:
	// the server read its clock after the sync was sent and before its reply came back, so
	// the offset lies between (server time - local receive time) and (server time - local
	// send time); each sync moves it by the least that puts it in those bounds (so clocks
	// that agree keep offset 0 exactly).
	offset int64
	// firstEnded counts the key's first syncs tried and ended (under mu); firstErr is the last
	// one's error. A caller waiting for the first sync takes the outcome of the first attempt
	// that ends after it came, rather than trying again itself.
	firstEnded uint64
	firstErr   error
}

// index returns the server's sub-window index at local time nowMs, through the offset the
// last sync measured: admissions are counted in the server's sub-windows, as sync.lua files
// them, whatever this host's clock says. The caller holds st.mu.
func (st *approx) index(nowMs, sub int64) int64 {
	return (nowMs + st.offset) / sub
}

// count is a number of admissions in one sub-window.
type count struct{ idx, n int64 }

// syncReq is one sync: a sequence number and the counts it carries.
type syncReq struct {
	seq    uint64
	counts []count
}

// approximate admits n for key if this instance's estimate of the key's count in the
// current window, plus n, stays within Rate, and this instance has fewer than MaxUnsynced
// admissions not yet synced. It syncs first when SyncInterval has passed since the last
// sync or the unsynced admissions would pass MaxUnsynced; one goroutine per key syncs,
// the others decide on the estimate they have, and a request that only waits for the sync
// in flight (too many unsynced admissions, within Rate) waits for it instead of being denied.
func (l *Limiter) approximate(ctx context.Context, key string, n int64) (Result, error) {
	st := l.state(key)
	now := l.o.Clock()
	st.mu.Lock()
	due := now.Sub(st.lastSync) >= l.o.SyncInterval || st.unsynced+n > l.o.MaxUnsynced
	first := st.lastSync.IsZero()
	st.mu.Unlock()
	if due {
		if err := l.syncTurn(ctx, st, key, first); err != nil {
			if first || ctx.Err() != nil {
				return Result{RetryAfter: -1}, err
			}
			// The sync failed (its counts stay pending and go with the next one): decide on
			// the last estimate, as between syncs, while the unsynced admissions stay within
			// MaxUnsynced; only a request that needs the sync itself gets the error.
			l.stats.syncErrors.Add(1)
			if r := l.admitApprox(st, key, n); r.Allowed || r.RetryAfter != 0 {
				return r, nil
			}
			return Result{RetryAfter: -1}, err
		}
	}
	r := l.admitApprox(st, key, n)
	if r.Allowed || r.RetryAfter != 0 {
		return r, nil
	}
	// Another goroutine's sync is in flight: wait for it, sync again if still needed.
	if err := st.enter(ctx); err != nil {
		return Result{RetryAfter: -1}, err
	}
	st.mu.Lock()
	due = st.unsynced+n > l.o.MaxUnsynced
	st.mu.Unlock()
	var err error
	if due {
		err = l.sync(ctx, st, key)
	}
	st.leave()
	if err != nil {
		return Result{RetryAfter: -1}, err
	}
	if r = l.admitApprox(st, key, n); !r.Allowed && r.RetryAfter <= 0 {
		r.RetryAfter = l.o.SyncInterval
	}
	return r, nil
}

// admitApprox decides a request on st as it is now (the clock read after any sync or wait).
func (l *Limiter) admitApprox(st *keyState, key string, n int64) Result {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := l.o.Clock()
	r := st.admit(st.index(now.UnixMilli(), l.sub), n, l.o)
	if r.Allowed {
		l.admitted(key, now, n)
	}
	return r
}

// syncTurn syncs key if no other goroutine of this instance is syncing it. Before the key's
// first sync (first), the offset to the server's clock is not known: it waits for its turn
// instead, and takes the outcome of a first sync that ended meanwhile (so that while Redis
// is down, callers of a new key fail together, not one sync timeout after another).
func (l *Limiter) syncTurn(ctx context.Context, st *keyState, key string, first bool) error {
	if !first {
		select {
		case st.busy <- struct{}{}:
		default:
			return nil
		}
		err := l.sync(ctx, st, key)
		st.leave()
		return err
	}
	st.mu.Lock()
	came := st.firstEnded
	st.mu.Unlock()
	select {
	case st.busy <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer st.leave()
	st.mu.Lock()
	synced, ended, err := !st.lastSync.IsZero(), st.firstEnded != came, st.firstErr
	st.mu.Unlock()
	if synced {
		return nil
	}
	if ended {
		return err // the attempt this caller waited for failed
	}
	err = l.sync(ctx, st, key)
	if err != nil && ctx.Err() != nil {
		return err // this caller's own ctx ended the attempt: the waiters try themselves
	}
	st.mu.Lock()
	st.firstEnded++
	st.firstErr = err
	st.mu.Unlock()
	return err
}

// admit decides a request of cost n in sub-window cur on the estimate and the unsynced
// counts, and counts it when admitted (pure: tested without Redis). The caller holds st.mu.
func (st *approx) admit(cur, n int64, o Options) Result {
	span := int64(o.span())
	st.prune(cur, span)
	est := st.est
	if cur-st.estIdx >= span {
		est = 0 // every sub-window of the estimate has left the window
	}
	used := est + st.unsynced
	if used+n > o.Limit.Rate || st.unsynced+n > o.MaxUnsynced {
		wait := o.SyncInterval
		if used+n <= o.Limit.Rate {
			wait = 0 // waiting for a sync in flight
		}
		return Result{Remaining: max(0, o.Limit.Rate-used), RetryAfter: wait}
	}
	if k := len(st.counts); k > 0 && st.counts[k-1].idx >= cur {
		// The same sub-window, or a later one the offset of the previous sync gave: counted
		// there (later, never earlier: it stays in the window longer).
		st.counts[k-1].n += n
	} else {
		st.counts = append(st.counts, count{cur, n})
	}
	st.unsynced += n
	return Result{Allowed: true, Remaining: o.Limit.Rate - used - n, RetryAfter: -1}
}

// prune forgets unsynced counts of sub-windows that have left the window. The caller
// holds st.mu.
func (st *approx) prune(cur, k int64) {
	i := 0
	for i < len(st.counts) && st.counts[i].idx <= cur-k {
		st.unsynced -= st.counts[i].n
		i++
	}
	st.counts = st.counts[i:]
}

// sync sends st's pending sync, or a new one carrying its unsynced counts, with the same
// sequence number on every attempt, and installs the shared count it returns. The caller
// holds st's turn.
func (l *Limiter) sync(ctx context.Context, st *keyState, key string) error {
	sent := l.o.Clock()
	st.mu.Lock()
	req := st.nextSync(st.index(sent.UnixMilli(), l.sub), int64(l.o.span()), &l.ids)
	st.mu.Unlock()

	est, now, err := l.sendSync(ctx, key, req)
	if err != nil {
		return err
	}
	recv := l.o.Clock()
	l.stats.syncs.Add(1)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.offset = min(max(st.offset, now-recv.UnixMilli()), now-sent.UnixMilli())
	st.applySync(req, est, now/l.sub, sent, int64(l.o.span()))
	return nil
}

// nextSync returns the sync to send: the pending one, whose outcome is unknown, unchanged,
// or a new one carrying the unsynced counts of the sub-windows still in the window (cur is
// the current one), numbered from ids. The caller holds st.mu.
func (st *approx) nextSync(cur, span int64, ids *atomic.Uint64) *syncReq {
	st.prune(cur, span)
	if st.pending == nil {
		st.pending = &syncReq{seq: ids.Add(1), counts: append([]count(nil), st.counts...)}
	}
	return st.pending
}

// sendSync runs sync.lua for req, sending it up to Attempts times while the connection
// fails, and returns the shared count and the server's time in milliseconds.
func (l *Limiter) sendSync(ctx context.Context, key string, req *syncReq) (est, nowMs int64, err error) {
	args := []any{l.sub, l.o.span(), l.inst, req.seq}
	for _, c := range req.counts {
		args = append(args, c.idx, c.n)
	}
	var v []any
	for range l.o.Attempts {
		l.stats.calls.Add(1)
		if v, err = syncScript.Run(ctx, l.client, []string{l.syncKey(key)}, args...).Slice(); err == nil || !retryable(ctx, err) {
			break
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("ratelimit: sync %q: %w", key, err)
	}
	if len(v) != 4 {
		return 0, 0, fmt.Errorf("ratelimit: sync: malformed reply %v", v)
	}
	est, ok1 := v[1].(int64)
	nowMs, ok2 := v[2].(int64)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("ratelimit: sync: malformed reply %v", v)
	}
	return est, nowMs, nil
}

// applySync installs the shared count est of the window ending at sub-window idx, which
// now holds the counts req carried, and drops those counts from the unsynced ones (pure:
// tested without Redis). The caller holds st.mu.
func (st *approx) applySync(req *syncReq, est, idx int64, sent time.Time, span int64) {
	st.pending = nil
	st.est, st.estIdx, st.lastSync = est, idx, sent
	for _, c := range req.counts { // these are in est now
		for i := range st.counts {
			if st.counts[i].idx == c.idx {
				d := min(c.n, st.counts[i].n)
				st.counts[i].n -= d
				st.unsynced -= d
			}
		}
	}
	kept := st.counts[:0]
	for _, c := range st.counts {
		if c.n > 0 {
			kept = append(kept, c)
		}
	}
	st.counts = kept
	st.prune(idx, span)
}
