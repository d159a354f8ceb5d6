package ratelimit

import "time"

// SetAdmitHook makes l call f with the instant of every admission decision: the server's
// clock for Exact mode, this process's clock (the one the decision compared with the
// chunk's deadline) for Leased and Approximate modes.
func SetAdmitHook(l *Limiter, f func(key string, at time.Time, n int64)) { l.onAdmit = f }

// SlotKey exposes the base key of budget slot j of key.
func SlotKey(l *Limiter, key string, j int) string { return l.slotKey(key, j) }

// SubMs exposes the sub-window length in milliseconds.
func SubMs(l *Limiter) int64 { return l.sub }

// SetGrantHook makes l call f with the server instant (ms) and size of every chunk it
// installs in Leased mode.
func SetGrantHook(l *Limiter, f func(serverMs, cells int64)) { l.onGrant = f }

// SetAbandonHook makes l call f with the slot and request ID of every chunk request it gave
// up on in Leased mode (no attempt was answered), whose grant, if it ran, is never spent.
func SetAbandonHook(l *Limiter, f func(slot int, id string)) { l.onAbandon = f }

// Leases tells whether l leases key now because it is hot in the fleet's sum
// (Options.HotRate), false when l holds no state for key.
func Leases(l *Limiter, key string) bool {
	st, ok := l.states.GetIfPresent(key)
	if !ok {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.hot
}
