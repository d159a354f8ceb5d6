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
// the others decide on the estimate they have.
func (l *Limiter) approximate(ctx context.Context, key string, n int64) (Result, error) {
	st := l.state(key)
	now := l.o.Clock()
	st.mu.Lock()
	due := now.Sub(st.lastSync) >= l.o.SyncInterval || st.unsynced+n > l.o.MaxUnsynced
	st.mu.Unlock()
	if due {
		select {
		case st.busy <- struct{}{}:
			err := l.sync(ctx, st, key)
			st.leave()
			if err != nil {
				return Result{RetryAfter: -1}, err
			}
			now = l.o.Clock()
		default:
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.admit(now.UnixMilli()/l.sub, n, l.o)
	if r.Allowed {
		l.admitted(key, now, n)
	}
	return r, nil
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
	if k := len(st.counts); k > 0 && st.counts[k-1].idx == cur {
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
	req := st.nextSync(sent.UnixMilli()/l.sub, int64(l.o.span()), &l.ids)
	st.mu.Unlock()

	est, now, err := l.sendSync(ctx, key, req)
	if err != nil {
		return err
	}
	l.stats.syncs.Add(1)
	st.mu.Lock()
	defer st.mu.Unlock()
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
