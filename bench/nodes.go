package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// adminCommands are left out of the per-node counts: they are the harness's own probes.
var adminCommands = map[string]bool{
	"info": true, "ping": true, "cluster": true, "config": true, "client": true,
	"hello": true, "command": true, "script": true, "readonly": true,
}

// nodeOps returns, per master address, the calls of data commands in INFO commandstats, and
// per command name their sum over the masters.
func nodeOps(ctx context.Context, c *redis.ClusterClient) (map[string]uint64, map[string]uint64, error) {
	out, cmds, _, err := nodeOpsAt(ctx, c)
	return out, cmds, err
}

// nodeOpsAt is nodeOps that also returns, per master address, the moment its counters were
// read (the middle of its INFO round trip): a busy harness reads the masters at different
// moments, and each master's rate must be taken over its own interval.
func nodeOpsAt(ctx context.Context, c *redis.ClusterClient) (map[string]uint64, map[string]uint64, map[string]time.Time, error) {
	out, cmds, at := map[string]uint64{}, map[string]uint64{}, map[string]time.Time{}
	var mu sync.Mutex
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		sent := time.Now()
		s, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		read := sent.Add(time.Since(sent) / 2)
		per := map[string]uint64{}
		n, err := dataCallsBy(s, per)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		out[m.Options().Addr] = n
		at[m.Options().Addr] = read
		for k, v := range per {
			cmds[k] += v
		}
		return nil
	})
	return out, cmds, at, err
}

// dataCalls sums the calls of INFO commandstats, less adminCommands.
func dataCalls(info string) (uint64, error) { return dataCallsBy(info, nil) }

// dataCallsBy is dataCalls that also adds each command's calls to by, when by is not nil.
func dataCallsBy(info string, by map[string]uint64) (uint64, error) {
	var total uint64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		cmd, _, _ := strings.Cut(strings.TrimPrefix(name, "cmdstat_"), "|")
		if adminCommands[cmd] {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("bad commandstats line %q: %w", line, err)
				}
				total += n
				if by != nil {
					by[cmd] += n
				}
			}
		}
	}
	return total, sc.Err()
}

// deltas returns after-before for each of addrs, in that order.
func deltas(addrs []string, before, after map[string]uint64) []uint64 {
	d := make([]uint64, len(addrs))
	for i, a := range addrs {
		d[i] = after[a] - before[a]
	}
	return d
}

// skew is max/mean of xs: 1 for an even load, len(xs) when one node takes everything.
func skew(xs []uint64) float64 {
	var sum, hi uint64
	for _, x := range xs {
		sum += x
		hi = max(hi, x)
	}
	if sum == 0 {
		return math.NaN()
	}
	return float64(hi) / (float64(sum) / float64(len(xs)))
}

// percentile returns the q-quantile (0..1) of sorted latencies in nanoseconds.
func percentile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// masters returns the sorted master addresses of c.
func masters(ctx context.Context, c *redis.ClusterClient) ([]string, error) {
	var mu sync.Mutex
	var out []string
	err := c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, m.Options().Addr)
		return nil
	})
	sort.Strings(out)
	return slices.Compact(out), err
}
