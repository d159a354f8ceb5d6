// Package bound makes a Redis round trip return by its caller's deadline whatever the
// client's options.
//
// A stock go-redis client (ContextTimeoutEnabled false, the default) does not end a read
// when its context ends: a call to a master that stopped answering returns after the
// client's ReadTimeout, times its retries (about 5s with the defaults), and a context
// cancelled without a deadline does not end it at all before then. Call runs the round
// trip in a goroutine of its own and returns as soon as the caller's context is done; the
// round trip itself finishes in the background (within the client's own timeouts) and its
// result is dropped. To the protocol that is a lost reply, which every mutating script of
// the project already tolerates (each is idempotent by operation ID).
package bound

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Call runs f and returns its result, or, as soon as ctx is done first, ctx's error. In that
// case f keeps running in its own goroutine until it returns, and late (when not nil) is
// called with its result from that goroutine. A ctx that can never be done (Done returns
// nil) runs f in the caller's goroutine.
func Call[T any](ctx context.Context, f func() (T, error), late func(T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	// state: 0 while the caller waits, delivered once f's result is the caller's,
	// abandoned once the caller left; whoever moves it from 0 decides who gets the result.
	const delivered, abandoned = 1, 2
	var state atomic.Int32
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		if state.CompareAndSwap(0, delivered) {
			ch <- result{v, err}
		} else if late != nil {
			late(v, err)
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(0, abandoned) {
			return zero, ctx.Err()
		}
		r := <-ch // f's result was already the caller's
		return r.v, r.err
	}
}

// Do is Call without a late callback: f's result is dropped when ctx ends first.
func Do[T any](ctx context.Context, f func() (T, error)) (T, error) { return Call(ctx, f, nil) }

// Pipeliner is the part of a go-redis client Pipelined needs.
type Pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Pipelined runs c.Pipelined(ctx, fn) through Call. When ctx ends first, the commands fn
// queued are still being sent or read: the caller must not read them (it has ctx's error).
func Pipelined(ctx context.Context, c Pipeliner, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	return Do(ctx, func() ([]redis.Cmder, error) { return c.Pipelined(ctx, fn) })
}

// Do2 is Do for a call with two results, such as a SCAN (keys and cursor).
func Do2[A, B any](ctx context.Context, f func() (A, B, error)) (A, B, error) {
	type pair struct {
		a A
		b B
	}
	p, err := Do(ctx, func() (pair, error) {
		a, b, err := f()
		return pair{a, b}, err
	})
	return p.a, p.b, err
}
