package faults

import (
	"bytes"
	"net"
	"sync"
	"time"
)

var noScript = []byte("-NOSCRIPT")

// conn forwards a client's connection to a server, applying its Injector's faults.
type conn struct {
	net.Conn
	in   *Injector
	addr string

	mu        sync.Mutex
	pending   []byte    // written bytes not yet parsed into whole commands
	dropArmed *dropRule // the drop a written command consumed, until its reply arrives
	dropped   bool      // a reply was dropped: the connection is dead to its reader
	closeOnce sync.Once
}

func (c *conn) Write(b []byte) (int, error) {
	if d := time.Duration(c.in.latency.Load()); d > 0 {
		time.Sleep(d)
	}
	if c.in.blackholed(c.addr) {
		return len(b), nil // swallowed: the server never sees it
	}
	c.mu.Lock()
	c.pending = append(c.pending, b...)
	var cmds [][]string
	cmds, c.pending = parseCommands(c.pending)
	for _, cmd := range cmds {
		if r := c.in.takeDrop(c.addr, cmd); r != nil {
			c.dropArmed = r
		}
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *conn) Read(b []byte) (int, error) {
	c.mu.Lock()
	dead := c.dropped
	c.mu.Unlock()
	if dead {
		return 0, ErrReplyDropped
	}
	for {
		n, err := c.Conn.Read(b)
		if n > 0 && c.in.blackholed(c.addr) {
			continue // replies to commands sent before the blackhole are lost too
		}
		c.mu.Lock()
		drop := c.dropArmed != nil && n > 0
		if drop && bytes.HasPrefix(b[:n], noScript) {
			c.in.rearm(c.dropArmed) // nothing ran: wait for the EVAL that follows
			c.dropArmed, drop = nil, false
		}
		c.dropped = c.dropped || drop
		c.mu.Unlock()
		if drop {
			// The first reply bytes prove the server executed the command; the client never
			// sees them.
			c.in.dropped.Add(1)
			_ = c.Close()
			return 0, ErrReplyDropped
		}
		return n, err
	}
}

func (c *conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.in.forget(c)
		err = c.Conn.Close()
	})
	return err
}

// SetDeadline and friends pass through so that blackholed reads still time out.
func (c *conn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(t) }
func (c *conn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(t) }
func (c *conn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(t) }
