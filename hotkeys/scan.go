package hotkeys

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ScanOptions bound a ScanTop walk.
type ScanOptions struct {
	// Match is the SCAN MATCH pattern. Default: "*".
	Match string
	// Limit is the number of keys read per node, at least 1. Default: 10000.
	Limit int
	// K is the number of keys returned, at least 1. Default: DefaultTopK (10).
	K int
}

// DefaultScanLimit is the default ScanOptions.Limit.
const DefaultScanLimit = 10000

// ScanTop walks up to Limit keys on every node with SCAN, reads their OBJECT FREQ, and
// returns the K most frequently accessed, highest first. It is the library form of
// redis-cli --hotkeys: its cost grows with Limit, so run it off the request path. It returns
// an *UnsupportedError (wrapping ErrUnsupported) when a node has no LFU policy.
func (p *Probe) ScanTop(ctx context.Context, o ScanOptions) ([]ServerKey, error) {
	if o.Match == "" {
		o.Match = "*"
	}
	if o.Limit == 0 {
		o.Limit = DefaultScanLimit
	}
	if o.K == 0 {
		o.K = DefaultTopK
	}
	if o.Limit < 1 || o.K < 1 {
		return nil, fmt.Errorf("%w: ScanOptions.Limit and ScanOptions.K must be >= 1, got %d and %d", ErrInvalid, o.Limit, o.K)
	}
	var mu sync.Mutex
	var all []ServerKey
	err := p.eachNode(ctx, func(ctx context.Context, c *redis.Client) error {
		got, err := scanNode(ctx, c, o)
		mu.Lock()
		all = append(all, got...)
		mu.Unlock()
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, byFreq)
	return all[:min(o.K, len(all))], nil
}

// scanNode reads the frequencies of up to o.Limit keys of one node.
func scanNode(ctx context.Context, c *redis.Client, o ScanOptions) ([]ServerKey, error) {
	node := c.Options().Addr
	var out []ServerKey
	var cursor uint64
	seen := 0
	for {
		keys, next, err := c.Scan(ctx, cursor, o.Match, 256).Result()
		if err != nil {
			return nil, fmt.Errorf("hotkeys: SCAN on %s: %w", node, err)
		}
		if len(keys) > o.Limit-seen {
			keys = keys[:o.Limit-seen]
		}
		seen += len(keys)
		if len(keys) > 0 {
			got, err := freqs(ctx, c, node, keys)
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
			slices.SortFunc(out, byFreq)
			out = out[:min(o.K, len(out))]
		}
		cursor = next
		if cursor == 0 || seen >= o.Limit {
			return out, nil
		}
	}
}
