package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// Limiter applies one [Limit] to any number of keys (per merchant, per user), shared by
// every instance that uses the same Options on the same Redis. It is safe for concurrent
// use. Local state (chunks, unsynced counts) is kept per key for at most Options.MaxKeys
// keys and dropped after Options.KeyIdle without use.
type Limiter struct {
	client    Client
	o         Options
	limit     string // the limit's part of every key: Options.limitID
	sub       int64  // sub-window length, ms
	maxCost   int64
	inst      string // this instance's token, from crypto/rand
	ids       atomic.Uint64
	states    *otter.Cache[string, *keyState]
	hot       atomic.Pointer[hotSet]
	hotBusy   atomic.Bool
	stats     counters
	closed    atomic.Bool
	onAdmit   func(key string, at time.Time, n int64) // test hook; nil in production
	onGrant   func(serverMs, cells int64)             // test hook; nil in production
	onAbandon func(slot int, id string)               // test hook; nil in production
}

// Result is the answer to one request.
type Result struct {
	// Allowed tells whether the request was admitted (all of its cost, or nothing).
	Allowed bool
	// Remaining is what is left: in Exact mode, of the key's limit on the server; in Leased
	// mode, of the chunk this instance holds; in Approximate mode, of the limit by this
	// instance's estimate.
	Remaining int64
	// RetryAfter is how long to wait before the same request can be admitted, or -1 when it
	// was admitted or never can be.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back at its full limit, as far as known.
	ResetAfter time.Duration
}

// keyState is the local state of one key. Leased and Approximate modes use it.
type keyState struct {
	mu   sync.Mutex
	busy chan struct{} // one Redis round trip per key per instance at a time
	lease
	approx
	heat
}

// New returns a Limiter over client. It validates o (errors wrap [ErrInvalid] and name the
// field) and does no I/O. Close it to release its local state.
func New(client Client, o Options) (*Limiter, error) {
	if client == nil {
		return nil, invalidf("client must not be nil")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("ratelimit: instance token: %w", err)
	}
	l := &Limiter{client: client, o: o, sub: o.subMs(), inst: hex.EncodeToString(tok[:]), limit: o.limitID()}
	switch {
	case o.Window == GCRA:
		l.maxCost = o.Limit.Burst
	case o.Mode == Leased:
		l.maxCost = o.budget(o.Slots - 1)
	case o.Mode == Approximate:
		// An instance holds at most MaxUnsynced admissions unsynced: a larger cost could
		// never be admitted.
		l.maxCost = o.MaxUnsynced
	default:
		l.maxCost = o.Limit.Rate
	}
	if o.Mode != Exact {
		l.states, err = otter.New(&otter.Options[string, *keyState]{
			MaximumSize:      o.MaxKeys,
			ExpiryCalculator: otter.ExpiryAccessing[string, *keyState](o.KeyIdle),
			OnDeletion: func(e otter.DeletionEvent[string, *keyState]) {
				l.dropped(e.Value)
			},
		})
		if err != nil {
			return nil, errors.Join(errors.New("ratelimit: key state store"), err)
		}
	}
	return l, nil
}

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN admits a request of cost n for key, or not. n must be 1..Burst with GCRA,
// 1..Rate/Slots in Leased mode, 1..MaxUnsynced in Approximate mode and 1..Rate otherwise. On a Redis error the request is not
// admitted and the error is returned (wrapped); whether to fail open is the caller's
// choice. In Leased mode a request served from a chunk this instance holds needs no Redis
// call, so it succeeds while Redis is unreachable.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Result, error) {
	if l.closed.Load() {
		return Result{}, ErrClosed
	}
	if err := l.checkKey(key); err != nil {
		return Result{}, err
	}
	if n < 1 || n > l.maxCost {
		return Result{}, invalidf("cost must be 1..%d, got %d", l.maxCost, n)
	}
	var (
		r   Result
		err error
	)
	switch {
	case l.o.Window == GCRA:
		r, err = l.gcra(ctx, key, n)
	case l.o.Mode == Exact:
		r, err = l.exact(ctx, key, n, nil)
	case l.o.Mode == Leased && l.o.HotRate > 0:
		r, err = l.byFleetRate(ctx, key, n)
	case l.o.Mode == Leased && l.o.HotKeys != nil && !l.isHot(key):
		r, err = l.exact(ctx, key, n, nil)
	case l.o.Mode == Leased:
		r, err = l.leased(ctx, key, n)
	default:
		r, err = l.approximate(ctx, key, n)
	}
	switch {
	case err != nil:
		l.stats.errors.Add(1)
	case r.Allowed:
		l.stats.allowed.Add(1)
	default:
		l.stats.denied.Add(1)
	}
	return r, err
}

// state returns the local state of key, creating it.
func (l *Limiter) state(key string) *keyState {
	if st, ok := l.states.GetIfPresent(key); ok {
		return st
	}
	st, _ := l.states.SetIfAbsent(key, &keyState{busy: make(chan struct{}, 1)})
	return st
}

// enter takes st's round-trip turn, or returns ctx's error.
func (st *keyState) enter(ctx context.Context) error {
	select {
	case st.busy <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leave gives st's round-trip turn back.
func (st *keyState) leave() { <-st.busy }

// requestID returns a new request ID, unique across instances (instance token + counter).
func (l *Limiter) requestID() string {
	return l.inst + ":" + itoa(int64(l.ids.Add(1)))
}

// admitted reports an admission to the test hook.
func (l *Limiter) admitted(key string, at time.Time, n int64) {
	if l.onAdmit != nil {
		l.onAdmit(key, at, n)
	}
}

// Close drops the local state of every key (chunks held are not returned: they expire with
// their sub-window) and stops the state store's goroutines. Later calls return ErrClosed.
// Close is idempotent.
func (l *Limiter) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	if l.states != nil {
		l.states.InvalidateAll()
		l.states.StopAllGoroutines()
	}
	return nil
}
