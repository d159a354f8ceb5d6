package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/celebrity-go/celebrity/internal/script"
)

var (
	//go:embed peek_window.lua
	peekWindowLua string
	//go:embed peek_gcra.lua
	peekGCRALua string

	peekWindowScript = script.New(peekWindowLua)
	peekGCRAScript   = script.New(peekGCRALua)
)

// Usage is a key's use of its limit as the Redis servers count it, reported by
// [Limiter.Peek].
type Usage struct {
	// Used is the cells counted in the current window: admitted (Exact), granted to
	// instances as chunks, spent or not (Leased), or synced by the instances (Approximate:
	// counts an instance has not synced yet are not in Redis). With a GCRA window it is the
	// burst minus Remaining.
	Used int64
	// Remaining is what the window still admits (the limit's Rate minus Used, at least 0);
	// with a GCRA window, the cells a request could take at once now.
	Remaining int64
	// ResetAfter is how long until the key is back at its full limit; 0 if it is.
	ResetAfter time.Duration
	// Slots are the key's budget slots with a Sliding or Fixed window in Exact mode (one) and
	// in Leased mode (Options.Slots, placed on distinct masters of a cluster); nil with a
	// GCRA window and in Approximate mode.
	Slots []SlotUsage
}

// SlotUsage is one budget slot of a key.
type SlotUsage struct {
	// Slot is the slot's index, 0..Options.Slots-1.
	Slot int
	// Key is the base of the slot's Redis keys (its sub-window hashes are "<Key>:<index>"),
	// for an operator looking at the servers; the layout may change between versions.
	Key string
	// Budget is the slot's share of the limit's Rate.
	Budget int64
	// Used is the cells the slot counts in the current window.
	Used int64
}

// Peek reports key's use of its limit without admitting anything: it writes nothing to
// Redis and changes no local state (chunks held by this instance and its unsynced counts
// are not included). It runs one read-only script per budget slot, on the master of the
// slot. Errors about a bad key wrap ErrInvalid; after Close, Peek returns ErrClosed.
func (l *Limiter) Peek(ctx context.Context, key string) (Usage, error) {
	if l.closed.Load() {
		return Usage{}, ErrClosed
	}
	if err := l.checkKey(key); err != nil {
		return Usage{}, err
	}
	if l.o.Window == GCRA {
		return l.peekGCRA(ctx, key)
	}
	k := int64(l.o.span())
	var u Usage
	for j, base := range l.peekBases(key) {
		res, err := peekWindowScript.Run(ctx, l.client, []string{base}, l.sub, k).Int64Slice()
		if err != nil {
			return Usage{}, fmt.Errorf("ratelimit: peek %q: %w", key, err)
		}
		s, reset, err := slotUsage(j, base, l.o.budget(j), l.sub, k, res)
		if err != nil {
			return Usage{}, err
		}
		u.Used += s.Used
		u.ResetAfter = max(u.ResetAfter, reset)
		u.Slots = append(u.Slots, s)
	}
	u.Remaining = max(0, l.o.Limit.Rate-u.Used)
	if l.o.Mode == Approximate {
		u.Slots = nil
	}
	return u, nil
}

// peekBases returns the key bases Peek reads for key with a Sliding or Fixed window: the
// sync key in Approximate mode, else one per budget slot.
func (l *Limiter) peekBases(key string) []string {
	if l.o.Mode == Approximate {
		return []string{l.syncKey(key)}
	}
	bases := make([]string, 0, l.o.Slots)
	for j := range l.o.Slots {
		bases = append(bases, l.slotKey(key, j))
	}
	return bases
}

// slotUsage is the plan step of Peek for one slot: from peek_window.lua's reply res (the
// server time in ms, then the counts of the window's k sub-windows of sub ms, oldest first)
// it returns slot j's usage and how long until its counted cells have all left the window.
func slotUsage(j int, base string, budget, sub, k int64, res []int64) (SlotUsage, time.Duration, error) {
	if int64(len(res)) != k+1 {
		return SlotUsage{}, 0, fmt.Errorf("ratelimit: peek: malformed reply %v", res)
	}
	now, ns := res[0], res[1:]
	cur := now / sub
	s := SlotUsage{Slot: j, Key: base, Budget: budget}
	var reset time.Duration
	for i, n := range ns {
		s.Used += n
		if n > 0 { // sub-window cur-k+1+i leaves the window when sub-window cur+1+i begins
			reset = max(reset, time.Duration((cur+int64(i)+1)*sub-now)*time.Millisecond)
		}
	}
	return s, reset, nil
}

// peekGCRA reads a GCRA key with peek_gcra.lua.
func (l *Limiter) peekGCRA(ctx context.Context, key string) (Usage, error) {
	lim := l.o.Limit
	res, err := peekGCRAScript.Run(ctx, l.client, []string{l.gcraKey(key)},
		lim.Burst, lim.Rate, lim.Period.Microseconds()).Int64Slice()
	if err != nil {
		return Usage{}, fmt.Errorf("ratelimit: peek %q: %w", key, err)
	}
	if len(res) != 3 {
		return Usage{}, fmt.Errorf("ratelimit: peek: malformed reply %v", res)
	}
	return Usage{Used: lim.Burst - res[0], Remaining: res[0], ResetAfter: time.Duration(res[1]) * time.Microsecond}, nil
}

// Options returns the options l applies, with every default filled in (Window, SubWindows,
// Slots, Limit.Burst, Prefix and the rest), as New validated them.
func (l *Limiter) Options() Options { return l.o }
