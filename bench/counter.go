package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// counter is a go-redis hook on the harness's client: it counts every command the instances
// send (the client-side total, which unlike INFO commandstats does not count the commands a
// script runs inside Redis) and records when each read of the celebrity (the SET NX GET of
// its logical key that reads it or takes the fill lease, or the GET of a copy) was sent: the celebrity's Redis-level reads, from which the crossing of PromoteRate is
// measured.
type counter struct {
	celeb string
	start atomic.Int64 // Unix nanoseconds; nothing is counted before it is set
	sent  atomic.Uint64
	mu    sync.Mutex
	reads []time.Duration // since start
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.observe(cmd)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.observe(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *counter) observe(cmd redis.Cmder) {
	start := c.start.Load()
	name := cmd.Name()
	if start == 0 || adminCommands[name] {
		return
	}
	c.sent.Add(1)
	if name != "get" && name != "set" { // a copy's GET, or the logical key's SET NX GET
		return
	}
	if k, ok := cmd.Args()[1].(string); ok && strings.HasSuffix(k, c.celeb) {
		at := time.Duration(time.Now().UnixNano() - start)
		c.mu.Lock()
		c.reads = append(c.reads, at)
		c.mu.Unlock()
	}
}

// crossing returns the first moment at or after from when the celebrity's Redis-level reads in
// the trailing window w reached rate per second, or -1.
func (c *counter) crossing(from, w time.Duration, rate float64) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	need := int(rate*w.Seconds() + 0.999999)
	lo := 0
	for hi, at := range c.reads {
		for c.reads[lo] <= at-w {
			lo++
		}
		if at >= from && hi-lo+1 >= need {
			return at
		}
	}
	return -1
}
