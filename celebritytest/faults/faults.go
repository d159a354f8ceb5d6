// Package faults injects network faults between a go-redis client and its servers.
//
// An [Injector] wraps the client's dialer ([Injector.Dialer] fits redis.Options.Dialer and
// redis.ClusterOptions.Dialer), so every connection the client opens, to any node, passes
// through it. It can delay commands, stop forwarding them (a blackhole: the client times
// out), reset every live connection, refuse new ones, and — the fault every idempotency test
// needs — let a command reach the server and execute, then drop its reply ([Injector.DropReply]).
package faults

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Match selects commands by name and arguments. Zero fields match everything.
type Match struct {
	// Command is the command name, case-insensitive (e.g. "EVALSHA", "INCR"). "EVALSHA"
	// also matches EVAL: a script's first run on a server goes EVALSHA, NOSCRIPT, EVAL.
	Command string
	// Arg, when set, must be a substring of at least one argument.
	Arg string
	// Addr, when set, restricts the match to connections to this server address.
	Addr string
}

func (m Match) matches(addr string, cmd []string) bool {
	if len(cmd) == 0 {
		return false
	}
	if m.Addr != "" && m.Addr != addr {
		return false
	}
	if m.Command != "" && !strings.EqualFold(m.Command, cmd[0]) &&
		!(strings.EqualFold(m.Command, "EVALSHA") && strings.EqualFold(cmd[0], "EVAL")) {
		return false
	}
	if m.Arg == "" {
		return true
	}
	for _, a := range cmd[1:] {
		if strings.Contains(a, m.Arg) {
			return true
		}
	}
	return false
}

// ErrReplyDropped is the error a client reads in place of a dropped reply, and on every
// later read of that connection. go-redis takes it as a broken connection and retries the
// command: a *redis.Client unless built with MaxRetries: -1, a *redis.ClusterClient unless
// built with MaxRedirects: -1 as well.
var ErrReplyDropped error = droppedError{}

type droppedError struct{}

func (droppedError) Error() string   { return "faults: reply dropped after the command executed" }
func (droppedError) Timeout() bool   { return false }
func (droppedError) Temporary() bool { return true }

// ErrRefused is returned by the dialer while dials are refused.
var ErrRefused = errors.New("faults: connection refused by fault injection")

// Injector holds the faults applied to the connections it dialed. Its methods are safe for
// concurrent use and take effect on live connections immediately.
type Injector struct {
	latency   atomic.Int64 // nanoseconds added before each write is forwarded
	blackhole atomic.Bool
	refuse    atomic.Bool

	mu        sync.Mutex
	drops     []*dropRule
	conns     map[*conn]struct{}
	blackAddr map[string]bool

	dropped atomic.Int64
	dials   atomic.Int64
}

type dropRule struct {
	match Match
	left  int
}

// New returns an Injector with no faults set.
func New() *Injector {
	return &Injector{conns: map[*conn]struct{}{}, blackAddr: map[string]bool{}}
}

// DialFunc is the dialer shape go-redis options take.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dialer wraps next (a plain net.Dialer when nil) so that its connections carry the faults.
func (in *Injector) Dialer(next DialFunc) DialFunc {
	if next == nil {
		var d net.Dialer
		next = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if in.refuse.Load() {
			return nil, ErrRefused
		}
		nc, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		in.dials.Add(1)
		c := &conn{Conn: nc, in: in, addr: addr}
		in.mu.Lock()
		in.conns[c] = struct{}{}
		in.mu.Unlock()
		return c, nil
	}
}

// DropReply arms n drops: each of the next n commands matching m is forwarded and executed,
// and then its connection is closed after the first bytes of the reply arrived, so the
// client reads ErrReplyDropped instead of the reply. Replies of other commands pipelined on
// the same connection are lost with it. A NOSCRIPT reply proves nothing ran, so it is passed
// on and the drop waits for the EVAL that follows it.
func (in *Injector) DropReply(m Match, n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.drops = append(in.drops, &dropRule{match: m, left: n})
}

// Dropped returns how many replies were dropped so far.
func (in *Injector) Dropped() int64 { return in.dropped.Load() }

// Dials returns how many connections were opened through the injector.
func (in *Injector) Dials() int64 { return in.dials.Load() }

// SetLatency delays every command by d before it is forwarded. Zero removes the delay.
func (in *Injector) SetLatency(d time.Duration) { in.latency.Store(int64(d)) }

// Blackhole stops (on) or resumes forwarding on every connection: while on, commands are
// swallowed and no reply arrives, so clients time out.
func (in *Injector) Blackhole(on bool) { in.blackhole.Store(on) }

// BlackholeAddr is Blackhole for the connections to one server address only.
func (in *Injector) BlackholeAddr(addr string, on bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.blackAddr[addr] = on
}

// RefuseDials makes new dials fail with ErrRefused while on.
func (in *Injector) RefuseDials(on bool) { in.refuse.Store(on) }

// ResetAll closes every live connection, as a network reset would.
func (in *Injector) ResetAll() {
	in.mu.Lock()
	conns := make([]*conn, 0, len(in.conns))
	for c := range in.conns {
		conns = append(conns, c)
	}
	in.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Clear removes every fault: latency, blackholes, refusals and armed drops.
func (in *Injector) Clear() {
	in.latency.Store(0)
	in.blackhole.Store(false)
	in.refuse.Store(false)
	in.mu.Lock()
	in.drops = nil
	clear(in.blackAddr)
	in.mu.Unlock()
}

func (in *Injector) blackholed(addr string) bool {
	if in.blackhole.Load() {
		return true
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.blackAddr[addr]
}

// takeDrop returns the armed drop that cmd consumes, or nil.
func (in *Injector) takeDrop(addr string, cmd []string) *dropRule {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, r := range in.drops {
		if r.left > 0 && r.match.matches(addr, cmd) {
			r.left--
			if r.left == 0 {
				in.drops = append(in.drops[:i], in.drops[i+1:]...)
			}
			return r
		}
	}
	return nil
}

// rearm gives back a drop whose command turned out not to have run.
func (in *Injector) rearm(r *dropRule) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if r.left == 0 {
		in.drops = append(in.drops, r)
	}
	r.left++
}

func (in *Injector) forget(c *conn) {
	in.mu.Lock()
	delete(in.conns, c)
	in.mu.Unlock()
}
