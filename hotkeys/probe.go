package hotkeys

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/errs"
)

// Client is the go-redis client a Probe reads through: a *redis.Client, a
// *redis.ClusterClient or any redis.UniversalClient. It is the whole client, not a narrow
// part of it: a Probe visits every node of a cluster.
type Client = redis.UniversalClient

// Compile-time checks: the probe accepts both client kinds.
var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
)

// Probe reads the server's own view of key popularity. Redis 7 and later keep, under an LFU
// maxmemory-policy (allkeys-lfu, volatile-lfu), a logarithmic access counter per key that
// OBJECT FREQ returns; Probe reads it for candidate keys (Freq) or for keys found by SCAN
// (ScanTop). Under any other policy the counter does not exist and Probe returns an error
// wrapping ErrUnsupported. The counter is an ordinal (0..255, decaying by lfu-decay-time),
// not a rate: use it to confirm what the Detector sees, not to replace it.
//
// Redis 8.6 adds a HOTKEYS command with its own tracking sessions; Capabilities reports
// whether a node has it, and Probe does not drive it.
type Probe struct {
	c redis.UniversalClient
}

// NewProbe returns a Probe over c (a *redis.Client, *redis.ClusterClient or *redis.Ring).
func NewProbe(c Client) (*Probe, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: NewProbe needs a client, got nil", ErrInvalid)
	}
	return &Probe{c: c}, nil
}

// NodeCapability is what one node offers.
type NodeCapability struct {
	// Node is the node's address.
	Node string
	// Policy is its maxmemory-policy.
	Policy string
	// ObjectFreq reports whether OBJECT FREQ works (an LFU policy is selected).
	ObjectFreq bool
	// Hotkeys reports whether the node knows the HOTKEYS command (Redis 8.6+).
	Hotkeys bool
}

// Capabilities asks every node (every master of a cluster) for its maxmemory-policy and
// whether it knows HOTKEYS. It fails when CONFIG GET is refused (renamed on some managed
// services): Freq and ScanTop still detect the capability from OBJECT FREQ's own error.
func (p *Probe) Capabilities(ctx context.Context) ([]NodeCapability, error) {
	var mu sync.Mutex
	var out []NodeCapability
	err := p.eachNode(ctx, func(ctx context.Context, c *redis.Client) error {
		cfg, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return fmt.Errorf("hotkeys: CONFIG GET maxmemory-policy on %s: %w", c.Options().Addr, err)
		}
		nc := NodeCapability{Node: c.Options().Addr, Policy: cfg["maxmemory-policy"]}
		nc.ObjectFreq = strings.HasSuffix(nc.Policy, "-lfu")
		info, err := c.Do(ctx, "COMMAND", "INFO", "HOTKEYS").Slice()
		if err != nil {
			return fmt.Errorf("hotkeys: COMMAND INFO HOTKEYS on %s: %w", nc.Node, err)
		}
		nc.Hotkeys = len(info) == 1 && info[0] != nil
		mu.Lock()
		out = append(out, nc)
		mu.Unlock()
		return nil
	})
	// fn may still run after an abandoned wait: read out under mu, and return a copy.
	mu.Lock()
	res := slices.Clone(out)
	mu.Unlock()
	slices.SortFunc(res, func(a, b NodeCapability) int { return strings.Compare(a.Node, b.Node) })
	return res, err
}

// ServerKey is one key's access frequency as the server counts it.
type ServerKey struct {
	// Key is the key; Node the address of the server that holds it ("" for Freq on a
	// cluster, where the client routes by key).
	Key  string
	Node string
	// Freq is the LFU counter: logarithmic in the accesses, decaying with idle time.
	Freq int64
}

// Freq returns OBJECT FREQ for each key that exists, highest first (ties by key), in one
// pipeline. It returns an *UnsupportedError (wrapping ErrUnsupported) when a server holding
// one of the keys has no LFU policy.
func (p *Probe) Freq(ctx context.Context, keys []string) ([]ServerKey, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	return freqs(ctx, p.c, "", keys)
}

// freqs pipelines OBJECT FREQ for keys on c.
func freqs(ctx context.Context, c redis.Cmdable, node string, keys []string) ([]ServerKey, error) {
	cmds := make([]*redis.IntCmd, len(keys))
	_, err := bound.Pipelined(ctx, c, func(pipe redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = pipe.ObjectFreq(ctx, k)
		}
		return nil
	})
	if ctx.Err() != nil && err == ctx.Err() {
		return nil, fmt.Errorf("hotkeys: OBJECT FREQ: %w", err)
	}
	out := make([]ServerKey, 0, len(keys))
	for i, cmd := range cmds {
		f, err := cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue // the key does not exist (any more)
		case err != nil && strings.Contains(err.Error(), "LFU"):
			where := node
			if where == "" {
				where = "the node holding " + keys[i]
			}
			return nil, &UnsupportedError{Node: where, Reason: "OBJECT FREQ needs an LFU maxmemory-policy: " + err.Error()}
		case err != nil:
			return nil, fmt.Errorf("hotkeys: OBJECT FREQ %q: %w", errs.Short(keys[i]), err)
		}
		out = append(out, ServerKey{Key: keys[i], Node: node, Freq: f})
	}
	slices.SortFunc(out, byFreq)
	return out, nil
}

func byFreq(a, b ServerKey) int {
	if a.Freq != b.Freq {
		if a.Freq > b.Freq {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Key, b.Key)
}

// eachNode runs fn on every node: each master of a cluster, each shard of a ring, or the
// client itself. It returns by ctx's deadline or cancellation whatever the client's options
// (see internal/bound); fn may then still run, and its results must not be read.
func (p *Probe) eachNode(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	_, err := bound.Do(ctx, func() (struct{}, error) { return struct{}{}, p.forEachNode(ctx, fn) })
	return err
}

// forEachNode is eachNode without the bound.
func (p *Probe) forEachNode(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	switch c := p.c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Ring:
		return c.ForEachShard(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("%w: Probe supports *redis.Client, *redis.ClusterClient and *redis.Ring, got %T", ErrInvalid, p.c)
}
