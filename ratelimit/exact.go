package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// takeReply is a decoded reply of take.lua.
type takeReply struct {
	status             string // "ok", "dup" or "empty"
	granted, remaining int64
	ms, resetMs, nowMs int64
	seen               int64 // requests counted in the slot's last k+1 sub-windows; -1: unknown
}

// take runs take.lua on slot j of key, sending the same request ID up to Attempts times
// while the connection fails, so a lost reply is answered by the original grant. hits is
// the number of requests the call adds to the slot's count for the fleet's rate estimate.
func (l *Limiter) take(ctx context.Context, key string, j int, want, least int64, id string, hits int64) (takeReply, error) {
	args := []any{l.o.budget(j), want, least, l.sub, l.o.span(), id}
	if l.o.HotRate > 0 {
		args = append(args, hits) // counted for the fleet's rate estimate only then
	}
	keys := []string{l.slotKey(key, j)}
	var err error
	for range l.o.Attempts {
		l.stats.calls.Add(1)
		var v []any
		v, err = takeScript.Run(ctx, l.client, keys, args...).Slice()
		if err == nil {
			return decodeTake(v)
		}
		if !retryable(ctx, err) {
			break
		}
	}
	return takeReply{}, fmt.Errorf("ratelimit: take %q slot %d: %w", key, j, err)
}

// retryable tells whether a failed call may be sent again: a connection error, not a
// script error, with ctx still live.
func retryable(ctx context.Context, err error) bool {
	var re redis.Error
	return ctx.Err() == nil && !errors.As(err, &re)
}

// decodeTake decodes take.lua's reply.
func decodeTake(v []any) (takeReply, error) {
	if len(v) != 7 {
		return takeReply{}, fmt.Errorf("ratelimit: take: malformed reply %v", v)
	}
	s, _ := v[0].(string)
	r := takeReply{status: s}
	for i, p := range []*int64{&r.granted, &r.remaining, &r.ms, &r.resetMs, &r.nowMs, &r.seen} {
		x, ok := v[i+1].(int64)
		if !ok {
			return takeReply{}, fmt.Errorf("ratelimit: take: malformed reply %v", v)
		}
		*p = x
	}
	if s != "ok" && s != "dup" && s != "empty" {
		return takeReply{}, fmt.Errorf("ratelimit: take: unknown status %q", s)
	}
	return r, nil
}

// exact takes n cells for key from one budget slot per attempt (the only slot in Exact
// mode; in Leased mode for a key that is not hot, the slots in turn from a rotating start),
// all or nothing, consuming them at once. A denial carries a positive RetryAfter. With st
// (Options.HotRate set), the first slot asked counts the request for the fleet's rate
// estimate, and every reply updates st's heat.
func (l *Limiter) exact(ctx context.Context, key string, n int64, st *keyState) (Result, error) {
	id := l.requestID()
	start := int(l.ids.Load() % uint64(l.o.Slots))
	retry := time.Duration(-1)
	var reset time.Duration
	for i := range l.o.Slots {
		j := (start + i) % l.o.Slots
		var hits int64
		if st != nil && i == 0 {
			hits = 1
		}
		r, err := l.take(ctx, key, j, n, n, id+"/"+itoa(int64(j)), hits)
		if err == nil && r.status == "dup" && r.ms <= 0 {
			// A retry answered after the grant's sub-window ended: the cells were counted
			// there, and spending them now would count in a later window. They are left
			// unspent (under-admission), and the request is asked again, as a new one.
			r, err = l.take(ctx, key, j, n, n, l.requestID()+"/"+itoa(int64(j)), 0)
		}
		if err != nil {
			return Result{RetryAfter: -1}, err
		}
		if st != nil {
			l.heat(st, r)
		}
		reset = max(reset, ms(r.resetMs))
		if r.status == "ok" || (r.status == "dup" && r.ms > 0) {
			l.admitted(key, time.UnixMilli(r.nowMs), n)
			return Result{Allowed: true, Remaining: r.remaining, RetryAfter: -1, ResetAfter: ms(r.resetMs)}, nil
		}
		if r.status == "empty" && r.ms >= 0 && (retry < 0 || ms(r.ms) < retry) {
			retry = ms(r.ms)
		}
	}
	if retry <= 0 {
		retry = ms(l.sub) // no slot said when (a late reply twice): a sub-window
	}
	return Result{RetryAfter: retry, ResetAfter: reset}, nil
}

// gcra runs gcra.lua for key. A lost reply is not retried by this package (go-redis may
// retry it): a GCRA call holds no request ID, so a retry is a second request.
func (l *Limiter) gcra(ctx context.Context, key string, n int64) (Result, error) {
	l.stats.calls.Add(1)
	lim := l.o.Limit
	v, err := gcraScript.Run(ctx, l.client, []string{l.gcraKey(key)},
		lim.Burst, lim.Rate, lim.Period.Microseconds(), n).Slice()
	if err != nil {
		return Result{RetryAfter: -1}, fmt.Errorf("ratelimit: gcra %q: %w", key, err)
	}
	if len(v) != 5 {
		return Result{RetryAfter: -1}, fmt.Errorf("ratelimit: gcra: malformed reply %v", v)
	}
	var x [4]int64
	for i := range x {
		if x[i], _ = v[i+1].(int64); v[i+1] == nil {
			return Result{RetryAfter: -1}, fmt.Errorf("ratelimit: gcra: malformed reply %v", v)
		}
	}
	r := Result{Allowed: v[0] == "ok", Remaining: x[0], RetryAfter: us(x[1]), ResetAfter: us(x[2])}
	if r.Allowed {
		l.admitted(key, time.UnixMicro(x[3]), n)
	}
	return r, nil
}

// ms converts milliseconds to a Duration, keeping -1 as -1.
func ms(v int64) time.Duration {
	if v < 0 {
		return -1
	}
	return time.Duration(v) * time.Millisecond
}

// us converts microseconds to a Duration, keeping -1 as -1.
func us(v int64) time.Duration {
	if v < 0 {
		return -1
	}
	return time.Duration(v) * time.Microsecond
}
