package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/slot"
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
	// perNode[n][b] counts the commands sent to node n (by their first key's slot) in the
	// b-th bucketDur since start: a per-node load whose windows line up across nodes,
	// unlike INFO readings of three servers that a busy harness takes at different moments.
	perNode [][]atomic.Uint64
	owner   func(key string) int // the node index of a key, or -1
	mu      sync.Mutex
	reads   []time.Duration // since start
	// kinds[n][k] counts the commands sent to node n from onset to fade by kind k (kindCeleb,
	// kindLoop, kindTail); tailKeys counts the tail keys' commands in that span, per key.
	kinds      [][3]atomic.Uint64
	tailKeys   map[string]uint64
	loopPrefix string
	from, to   time.Duration // the span kinds and tailKeys cover
}

// The kinds of commands the counter tells apart per node.
const (
	kindCeleb = iota // the celebrity's logical key, copies and lease
	kindLoop         // the fleet loop's keys (hot set, summary)
	kindTail         // every other key: the Zipf tail
)

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
	c.countNode(cmd, start)
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

// bucketDur is the resolution of counter.perNode.
const bucketDur = 100 * time.Millisecond

// countNode adds cmd to its node's bucket, when its first key is known: the key of a data
// command, the first key of a script call; commands without a key (PUBLISH) are left out.
func (c *counter) countNode(cmd redis.Cmder, start int64) {
	if c.owner == nil {
		return
	}
	args := cmd.Args()
	var key string
	switch cmd.Name() {
	case "publish", "subscribe", "ping", "info":
		return
	case "evalsha", "eval", "evalsha_ro", "eval_ro":
		if len(args) > 3 && fmt.Sprint(args[2]) != "0" {
			key, _ = args[3].(string)
		}
	default:
		if len(args) > 1 {
			key, _ = args[1].(string)
		}
	}
	n := -1
	if key != "" {
		n = c.owner(key)
	}
	since := time.Duration(time.Now().UnixNano() - start)
	b := int(since / bucketDur)
	if n >= 0 && n < len(c.kinds) && since >= c.from && since < c.to {
		k := kindTail
		switch {
		case strings.HasSuffix(key, c.celeb):
			k = kindCeleb
		case c.loopPrefix != "" && strings.HasPrefix(key, c.loopPrefix) && !strings.HasPrefix(key, c.loopPrefix+"r:"):
			k = kindLoop
		}
		c.kinds[n][k].Add(1)
		if k == kindTail {
			c.mu.Lock()
			c.tailKeys[key]++
			c.mu.Unlock()
		}
	}
	if n < 0 || n >= len(c.perNode) || b < 0 || b >= len(c.perNode[n]) {
		return
	}
	c.perNode[n][b].Add(1)
}

// nodeWindow returns the commands sent to each node in [from, to).
func (c *counter) nodeWindow(from, to time.Duration) []uint64 {
	out := make([]uint64, len(c.perNode))
	for n := range c.perNode {
		for b := int(from / bucketDur); b < int(to/bucketDur) && b < len(c.perNode[n]); b++ {
			out[n] += c.perNode[n][b].Load()
		}
	}
	return out
}

// byNode makes the counter count the commands sent per node for d, by the slot map of c.
func (c *counter) byNode(ctx context.Context, cl *redis.ClusterClient, nodes []string, d time.Duration) error {
	m, err := slot.Load(ctx, cl)
	if err != nil {
		return err
	}
	index := map[string]int{}
	for i, a := range nodes {
		index[a] = i
	}
	c.kinds = make([][3]atomic.Uint64, len(nodes))
	c.tailKeys = map[string]uint64{}
	c.perNode = make([][]atomic.Uint64, len(nodes))
	for n := range c.perNode {
		c.perNode[n] = make([]atomic.Uint64, int(d/bucketDur)+1)
	}
	c.owner = func(key string) int {
		if i, ok := index[m.Master(slot.Of(key))]; ok {
			return i
		}
		return -1
	}
	return nil
}
