package fleet

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// nodeLoadEvery is how many full evaluations apart the leader measures the masters' load
// (PromoteShare): a node's load moves slowly, and one INFO per master per interval would be
// most of the loop's own commands in a small fleet.
const nodeLoadEvery = 5

// nodeLoad is the leader's measure of each master's commands per second, for PromoteShare:
// the growth of INFO stats' total_commands_processed between two measurements, nodeLoadEvery
// full evaluations apart (the first one, by a new leader, at once). It is used only by the
// evaluation goroutine.
type nodeLoad struct {
	prev   map[string]uint64  // master address -> total_commands_processed at prevAt
	prevAt time.Time          // when prev was read
	rate   map[string]float64 // master address -> commands per second over the last period
}

// measureNodes reads every master's command counter and updates the rates. The first
// measurement (and one after a counter went back, as after a restart) yields no rate for that
// master, so PromoteShare promotes nothing there until the next one.
func (l *Loop) measureNodes(ctx context.Context) error {
	counts := map[string]uint64{}
	var mu sync.Mutex
	read := func(ctx context.Context, m *redis.Client, addr string) error {
		l.fleet.loopCommands.Add(1)
		info, err := m.Info(ctx, "stats").Result()
		if err != nil {
			return err
		}
		n, ok := commandsProcessed(info)
		if ok {
			mu.Lock()
			counts[addr] = n
			mu.Unlock()
		}
		return nil
	}
	var err error
	switch cl := l.client.(type) {
	case *redis.ClusterClient:
		err = cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return read(ctx, m, m.Options().Addr)
		})
	case *redis.Client:
		err = read(ctx, cl, "")
	default:
		return nil // a ring or failover client: no share of node load
	}
	now := l.o.Clock()
	nl := &l.fleet.nodes
	secs := now.Sub(nl.prevAt).Seconds()
	nl.rate = map[string]float64{}
	for addr, n := range counts {
		if p, ok := nl.prev[addr]; ok && n >= p && secs > 0 {
			nl.rate[addr] = float64(n-p) / secs
		}
	}
	nl.prev, nl.prevAt = counts, now
	return err
}

// commandsProcessed reads total_commands_processed from an INFO stats reply.
func commandsProcessed(info string) (uint64, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// nodeRate is the commands per second last measured on the master that holds key, or 0 when
// unknown.
func (l *Loop) nodeRate(ctx context.Context, key string) float64 {
	rates := l.fleet.nodes.rate
	if len(rates) == 0 {
		return 0
	}
	if cl, ok := l.client.(*redis.ClusterClient); ok {
		m, err := cl.MasterForKey(ctx, key)
		if err != nil {
			return 0
		}
		return rates[m.Options().Addr]
	}
	return rates[""]
}

// hotByShare reports whether a key not yet hot, read at rate fleet-wide, takes at least
// PromoteShare of its master's commands (and rate reaches ShareMinRate).
func (l *Loop) hotByShare(ctx context.Context, key string, rate float64) bool {
	if l.o.PromoteShare <= 0 || rate < l.o.ShareMinRate {
		return false
	}
	node := l.nodeRate(ctx, key)
	return node > 0 && rate >= l.o.PromoteShare*node
}
