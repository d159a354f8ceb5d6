package faults

import (
	"net"
	"sync"
	"time"
)

// conn forwards a client's connection to a server, applying its Injector's faults.
type conn struct {
	net.Conn
	in   *Injector
	addr string

	mu        sync.Mutex
	pending   []byte // written bytes not yet parsed into whole commands
	dropArmed bool   // a written command's reply must be dropped
	dropped   bool   // a reply was dropped: the connection is dead to its reader
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
		if c.in.takeDrop(c.addr, cmd) {
			c.dropArmed = true
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
		drop := c.dropArmed && n > 0
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
