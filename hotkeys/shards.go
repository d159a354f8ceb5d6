package hotkeys

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/redis/go-redis/v9"
)

// ShardLoad is the estimated load of one shard over the current window.
type ShardLoad struct {
	// Shard is the name Options.Shard returned (a master address for ClusterShards).
	Shard string
	// Count is the estimated number of requests (or cost units) in the window.
	Count float64
	// Rate is Count per second of window covered (at least one sub-window).
	Rate float64
	// Share is the shard's fraction of the attributed load, in [0, 1].
	Share float64
}

// ShardView is the load of every shard and their skew.
type ShardView struct {
	// At is the clock time of the reading; Covered the history the window held.
	At      time.Time
	Covered time.Duration
	// Shards lists the shards, heaviest first (ties by name). With Options.AllShards,
	// idle shards are listed with zero load.
	Shards []ShardLoad
	// Mean and Max are the mean and largest shard rates.
	Mean, Max float64
	// Skew is Max/Mean: 1 for a perfectly even load, N when one of N shards takes
	// everything. It is 0 when no load was attributed.
	Skew float64
}

// ShardView returns the per-shard load attributed by Options.Shard over the current
// window, or ErrNoShards when Options.Shard is nil.
func (d *Detector) ShardView() (ShardView, error) {
	if d.o.Shard == nil {
		return ShardView{}, ErrNoShards
	}
	return d.shardView(d.collect(d.clock())), nil
}

// shardView computes the shard view of v.
func (d *Detector) shardView(v *view) ShardView {
	counts := v.shards
	if d.o.AllShards != nil {
		for _, name := range d.o.AllShards() { // host code, outside our locks
			if _, ok := counts[name]; !ok && name != "" {
				counts[name] = 0
			}
		}
	}
	var total uint64
	for _, w := range counts {
		total = addSat(total, w)
	}
	sv := ShardView{At: v.at, Covered: v.covered, Shards: make([]ShardLoad, 0, len(counts))}
	for name, w := range counts {
		sv.Shards = append(sv.Shards, ShardLoad{Shard: name, Count: d.scale(w), Rate: d.rate(v, w), Share: share(w, total)})
	}
	slices.SortFunc(sv.Shards, func(a, b ShardLoad) int {
		switch {
		case a.Count > b.Count:
			return -1
		case a.Count < b.Count:
			return 1
		case a.Shard < b.Shard:
			return -1
		case a.Shard > b.Shard:
			return 1
		}
		return 0
	})
	if total == 0 || len(sv.Shards) == 0 {
		return sv
	}
	sv.Max = sv.Shards[0].Rate
	sv.Mean = d.rate(v, total) / float64(len(sv.Shards))
	// Skew from the sampled weights, so that it is defined even when no time elapsed.
	// Saturated sums could push it past its range; it is clamped to [1, number of shards].
	sv.Skew = min(float64(counts[sv.Shards[0].Shard])*float64(len(sv.Shards))/float64(total), float64(len(sv.Shards)))
	return sv
}

// ClusterShards attributes keys to the masters of a Redis Cluster through its slot map.
// Pass its Shard and Masters methods as Options.Shard and Options.AllShards. The slot map
// is loaded by NewClusterShards and replaced by Refresh (after a failover or a resharding);
// lookups are lock-free and safe for concurrent use.
type ClusterShards struct {
	c *redis.ClusterClient
	m atomic.Pointer[slot.Map]
}

// NewClusterShards loads the slot map of c (CLUSTER SLOTS).
func NewClusterShards(ctx context.Context, c *redis.ClusterClient) (*ClusterShards, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: NewClusterShards needs a cluster client, got nil", ErrInvalid)
	}
	cs := &ClusterShards{c: c}
	if err := cs.Refresh(ctx); err != nil {
		return nil, err
	}
	return cs, nil
}

// Refresh reloads the slot map. On error the previous map stays in use.
func (cs *ClusterShards) Refresh(ctx context.Context) error {
	m, err := slot.Load(ctx, cs.c)
	if err != nil {
		return fmt.Errorf("hotkeys: load slot map: %w", err)
	}
	cs.m.Store(m)
	return nil
}

// Shard returns the address of the master that owns key's hash slot, or "" when the slot
// is unassigned.
func (cs *ClusterShards) Shard(key string) string {
	return cs.m.Load().Master(slot.Of(key))
}

// Masters returns the master addresses, sorted.
func (cs *ClusterShards) Masters() []string {
	return cs.m.Load().Masters()
}
