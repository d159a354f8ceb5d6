package hotkeys

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// EventKind says whether a key became hot or cooled.
type EventKind int

const (
	// Hot means the key crossed a hot threshold.
	Hot EventKind = iota + 1
	// Cool means the key stayed below every cool threshold for the hold time.
	Cool
)

// String returns "hot" or "cool".
func (k EventKind) String() string {
	switch k {
	case Hot:
		return "hot"
	case Cool:
		return "cool"
	}
	return "unknown"
}

// KeyEvent reports a hot or cool transition of one key.
type KeyEvent struct {
	Kind EventKind
	// Key is the key that changed state.
	Key string
	// Load is the key's load at the evaluation that decided the transition.
	Load KeyLoad
	// At is the clock time of that evaluation.
	At time.Time
	// Seq numbers the detector's events from 1, in the order they were decided, so a host
	// that calls Evaluate from several goroutines can order what it receives.
	Seq uint64
}

// evalState is the hot set and its hysteresis timers.
type evalState struct {
	mu     sync.Mutex
	hot    map[string]*hotState
	seq    uint64
	hotN   atomic.Uint64
	coolN  atomic.Uint64
	evals  atomic.Uint64
	hotNow atomic.Int64
	last   time.Time // time of the newest view applied
}

// hotState is the state of one hot key.
type hotState struct {
	since      time.Time
	belowSince time.Time // zero while the key is above a cool threshold
}

// Evaluate compares every tracked key with the thresholds and fires OnHot and OnCool. Every
// test uses the key's guaranteed sampled weight, its count minus its error bound (KeyLoad's
// Count - Error), never the overestimate. A key becomes hot when that weight is at least
// MinSamples and its share reaches HotShare or its rate reaches HotRate. A hot key cools
// once its share is below CoolShare and its rate below CoolRate (for the thresholds in use)
// at every evaluation during Hold; any
// evaluation above a cool threshold restarts the hold. The background goroutine calls
// Evaluate every EvalInterval; hosts that disable it call Evaluate themselves. A reading
// older than one already applied (a concurrent call, or a clock that went back) changes
// nothing. Callbacks run after the detector's locks are released.
func (d *Detector) Evaluate() {
	v := d.collect(d.clock())
	events := d.transitions(v)
	for _, ev := range events {
		if d.o.Logger != nil {
			d.o.Logger.Info("hotkeys: key "+ev.Kind.String(), "key", ev.Key, "share", ev.Load.Share, "rate", ev.Load.Rate)
		}
		switch {
		case ev.Kind == Hot && d.o.OnHot != nil:
			d.o.OnHot(ev)
		case ev.Kind == Cool && d.o.OnCool != nil:
			d.o.OnCool(ev)
		}
	}
}

// transitions updates the hot set from v and returns the events it decided.
func (d *Detector) transitions(v *view) []KeyEvent {
	st := &d.eval
	st.mu.Lock()
	defer st.mu.Unlock()
	st.evals.Add(1)
	if v.at.Before(st.last) {
		// A concurrent Evaluate already applied a newer reading: an older one must not
		// restart or advance hold timers.
		return nil
	}
	st.last = v.at
	events, seen := d.judgeTracked(st, v)
	events = append(events, d.coolUntracked(st, seen, v.at)...)
	st.number(events)
	st.hotNow.Store(int64(len(st.hot)))
	return events
}

// judgeTracked decides, for every key the sketch tracks in v, whether it turns hot or, if
// hot, starts, keeps or ends its cooling hold. It returns the events and the hot keys seen.
// The caller holds st.mu.
func (d *Detector) judgeTracked(st *evalState, v *view) ([]KeyEvent, map[string]bool) {
	var events []KeyEvent
	seen := make(map[string]bool, len(st.hot))
	for _, a := range v.keys {
		l := d.load(v, a)
		// Decisions use the guaranteed weight, count - error: a key that replaced the
		// sketch's smallest entry starts at about its error, so a key seen once in a stream
		// of distinct keys has a large count but nothing guaranteed.
		sure := subFloor(a.count, a.err)
		g := KeyLoad{Share: share(sure, v.total), Rate: d.rate(v, sure)}
		if h, ok := st.hot[a.key]; ok {
			seen[a.key] = true
			if d.warm(g) {
				h.belowSince = time.Time{}
			} else if ev, cooled := d.cool(st, h, a.key, l, v.at); cooled {
				events = append(events, ev)
			}
			continue
		}
		if sure >= d.o.MinSamples && d.hot(g) {
			// Seen: above a hot threshold is above its cool one, so this evaluation does
			// not start the key's cooling hold (the untracked pass would).
			seen[a.key] = true
			st.hot[a.key] = &hotState{since: v.at}
			events = append(events, KeyEvent{Kind: Hot, Key: a.key, Load: l, At: v.at})
		}
	}
	return events, seen
}

// coolUntracked runs the cooling hold, in key order, of the hot keys not in seen: the sketch
// no longer tracks them, so they have no load in the window. The caller holds st.mu.
func (d *Detector) coolUntracked(st *evalState, seen map[string]bool, at time.Time) []KeyEvent {
	var gone []string
	for key := range st.hot {
		if !seen[key] {
			gone = append(gone, key)
		}
	}
	slices.Sort(gone)
	var events []KeyEvent
	for _, key := range gone {
		if ev, cooled := d.cool(st, st.hot[key], key, KeyLoad{Key: key}, at); cooled {
			events = append(events, ev)
		}
	}
	return events
}

// number sorts events in a deterministic order (hot before cool, then by key), gives each
// the next sequence number and counts them. The caller holds st.mu.
func (st *evalState) number(events []KeyEvent) {
	slices.SortFunc(events, func(a, b KeyEvent) int {
		if a.Kind != b.Kind {
			return int(a.Kind) - int(b.Kind)
		}
		return strings.Compare(a.Key, b.Key)
	})
	for i := range events {
		st.seq++
		events[i].Seq = st.seq
		if events[i].Kind == Hot {
			st.hotN.Add(1)
		} else {
			st.coolN.Add(1)
		}
	}
}

// hot reports whether l reaches a hot threshold.
func (d *Detector) hot(l KeyLoad) bool {
	return (d.o.HotShare > 0 && l.Share >= d.o.HotShare) || (d.o.HotRate > 0 && l.Rate >= d.o.HotRate)
}

// warm reports whether l is at or above a cool threshold.
func (d *Detector) warm(l KeyLoad) bool {
	return (d.o.HotShare > 0 && l.Share >= d.o.CoolShare) || (d.o.HotRate > 0 && l.Rate >= d.o.CoolRate)
}

// cool advances the hold timer of a hot key below its cool thresholds and, once Hold has
// passed, removes it and returns its Cool event. The caller holds st.mu.
func (d *Detector) cool(st *evalState, h *hotState, key string, l KeyLoad, now time.Time) (KeyEvent, bool) {
	if h.belowSince.IsZero() {
		h.belowSince = now
	}
	if now.Sub(h.belowSince) < d.o.Hold {
		return KeyEvent{}, false
	}
	delete(st.hot, key)
	return KeyEvent{Kind: Cool, Key: key, Load: l, At: now}, true
}

// Hot returns the keys currently hot, sorted.
func (d *Detector) Hot() []string {
	d.eval.mu.Lock()
	defer d.eval.mu.Unlock()
	out := make([]string, 0, len(d.eval.hot))
	for k := range d.eval.hot {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
