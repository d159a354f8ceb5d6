package ratelimit

import (
	"context"
	"time"
)

// hotSet is the set of hot keys read from Options.HotKeys at one instant.
type hotSet struct {
	keys map[string]struct{}
	at   time.Time
}

// isHot reports key to Options.HotKeys and tells whether it is in the hot set, reading the
// set again when it is older than HotRefresh. One caller refreshes at a time, outside any
// lock of the Limiter; the others use the set they find.
func (l *Limiter) isHot(key string) bool {
	l.o.HotKeys.Observe(key)
	now := l.o.Clock()
	hs := l.hot.Load()
	if (hs == nil || now.Sub(hs.at) >= l.o.HotRefresh) && l.hotBusy.CompareAndSwap(false, true) {
		keys := l.o.HotKeys.Hot()
		fresh := &hotSet{keys: make(map[string]struct{}, len(keys)), at: now}
		for _, k := range keys {
			fresh.keys[k] = struct{}{}
		}
		l.hot.Store(fresh)
		l.hotBusy.Store(false)
		hs = fresh
	}
	if hs == nil {
		return false
	}
	_, ok := hs.keys[key]
	return ok
}

// heat is the Options.HotRate part of a key's local state: whether this instance leases the
// key, decided on the fleet's request rate estimated from take.lua's replies.
type heat struct {
	hot        bool      // the key leases chunks; otherwise it takes the exact path
	warmAt     time.Time // the last estimate at or above HotRate/2 (local clock)
	unreported int64     // requests served since the last chunk request, not yet counted
	gone       bool      // dropped from the state store: never promoted again
}

// fleetRate estimates the fleet's request rate for a key, per second, from one reply of
// take.lua: seen requests counted by that slot over span full sub-windows plus the elapsed
// part of the current one, times Slots, since each request is counted in one slot and the
// slots share them about evenly (pure: tested without Redis).
func (l *Limiter) fleetRate(r takeReply) float64 {
	covered := int64(l.o.span())*l.sub + r.nowMs%l.sub + 1
	return float64(l.o.Slots) * float64(r.seen) * 1000 / float64(covered)
}

// heat updates st's heat from reply r: the key turns hot (it leases) when the fleet's rate
// reaches HotRate, and stays hot while the rate has been at least HotRate/2 within the
// cool-down (see leases).
func (l *Limiter) heat(st *keyState, r takeReply) {
	if r.seen < 0 {
		return
	}
	rate := l.fleetRate(r)
	if rate < l.o.HotRate/2 {
		return
	}
	now := l.o.Clock()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.warmAt = now
	if rate >= l.o.HotRate && !st.hot && !st.gone {
		st.hot = true
		l.stats.leasing.Add(1)
		l.stats.hotSwitches.Add(1)
	}
}

// leases tells whether key st leases now: it is hot, and the fleet's rate was at least
// HotRate/2 within the last HotCoolDown; otherwise it turns cold here.
func (l *Limiter) leases(st *keyState) bool {
	now := l.o.Clock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.hot && now.Sub(st.warmAt) >= l.o.coolDown() {
		st.hot, st.unreported = false, 0
		l.stats.leasing.Add(-1)
		l.stats.coldSwitches.Add(1)
	}
	return st.hot
}

// dropped is the state store's deletion handler: a dropped hot key no longer leases.
func (l *Limiter) dropped(st *keyState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.gone = true
	if st.hot {
		st.hot = false
		l.stats.leasing.Add(-1)
		l.stats.coldSwitches.Add(1)
	}
}

// byFleetRate admits n for key on the leased path when the key is hot in the fleet's sum
// (Options.HotRate), on the exact path otherwise. Both take from the same budget slots, so
// a switch either way never admits beyond the limit; a chunk held at a switch to the exact
// path is left unspent (under-admission).
func (l *Limiter) byFleetRate(ctx context.Context, key string, n int64) (Result, error) {
	st := l.state(key)
	if l.leases(st) {
		return l.leasedOn(ctx, st, key, n)
	}
	return l.exact(ctx, key, n, st)
}
