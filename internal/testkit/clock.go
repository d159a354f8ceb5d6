package testkit

import (
	"sync/atomic"
	"time"
)

// Clock is a clock that moves only when told; its Now method is an Options.Clock. It is
// safe for concurrent use: a test advances it while the code under test reads it. The zero
// value reads the Unix epoch; readings carry no monotonic part.
type Clock struct {
	start int64        // nanoseconds since the epoch at Elapsed zero; set once by NewClock
	off   atomic.Int64 // nanoseconds since start
}

// NewClock returns a Clock that reads start until it is moved.
func NewClock(start time.Time) *Clock { return &Clock{start: start.UnixNano()} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.start+c.off.Load()) }

// Advance moves the clock forward by d (backward for a negative d).
func (c *Clock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// Elapsed returns how far the clock has moved from its start.
func (c *Clock) Elapsed() time.Duration { return time.Duration(c.off.Load()) }

// SetElapsed moves the clock to d after its start, forward or backward.
func (c *Clock) SetElapsed(d time.Duration) { c.off.Store(int64(d)) }
