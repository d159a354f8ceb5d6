package ratelimit

import "time"

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
