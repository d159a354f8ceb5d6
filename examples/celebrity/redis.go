package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// target is the Redis the example runs against: REDIS_CLUSTER_ADDRS, REDIS_ADDR, or three
// embedded in-process servers (miniredis) that the client routes by hash slot as if they
// were a cluster.
type target struct {
	client   redis.UniversalClient
	desc     string
	embedded []*miniredis.Miniredis
	masters  []string
	stop     chan struct{}
	wg       sync.WaitGroup
}

func connect(ctx context.Context) (*target, error) {
	if v := strings.TrimSpace(os.Getenv("REDIS_CLUSTER_ADDRS")); v != "" {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(v, ",")})
		t := &target{client: c}
		var mu sync.Mutex
		if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			mu.Lock()
			t.masters = append(t.masters, m.Options().Addr)
			mu.Unlock()
			return m.Ping(ctx).Err()
		}); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("REDIS_CLUSTER_ADDRS=%s: %w", v, err)
		}
		sort.Strings(t.masters)
		t.desc = fmt.Sprintf("Redis Cluster at %s (%d masters)", v, len(t.masters))
		return t, nil
	}
	if v := strings.TrimSpace(os.Getenv("REDIS_ADDR")); v != "" {
		c := redis.NewClient(&redis.Options{Addr: v})
		if err := c.Ping(ctx).Err(); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("REDIS_ADDR=%s: %w", v, err)
		}
		return &target{client: c, masters: []string{v}, desc: "standalone Redis at " + v}, nil
	}
	t := &target{stop: make(chan struct{})}
	for range 3 {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			t.close()
			return nil, err
		}
		t.embedded = append(t.embedded, m)
		t.masters = append(t.masters, m.Addr())
		t.wg.Go(func() { // TTLs follow the wall clock, as on a real server
			last, tick := time.Now(), time.NewTicker(50*time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-t.stop:
					return
				case now := <-tick.C:
					m.FastForward(now.Sub(last))
					last = now
				}
			}
		})
	}
	slots := splitSlots(t.masters)
	c := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) { return slots, nil },
	})
	c.AddHook(slotsHook{slots})
	t.client = c
	t.desc = "embedded in-process Redis: 3 miniredis servers, hash slots split in equal ranges " +
		"and routed by the client (set REDIS_ADDR or REDIS_CLUSTER_ADDRS to use a real server)"
	return t, nil
}

func splitSlots(addrs []string) []redis.ClusterSlot {
	per := 16384 / len(addrs)
	out := make([]redis.ClusterSlot, len(addrs))
	for i, a := range addrs {
		hi := (i+1)*per - 1
		if i == len(addrs)-1 {
			hi = 16383
		}
		out[i] = redis.ClusterSlot{Start: i * per, End: hi, Nodes: []redis.ClusterNode{{ID: a, Addr: a}}}
	}
	return out
}

// slotsHook answers CLUSTER SLOTS for the embedded servers, which have no cluster mode.
type slotsHook struct{ slots []redis.ClusterSlot }

func (slotsHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h slotsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c, ok := cmd.(*redis.ClusterSlotsCmd); ok {
			c.SetVal(h.slots)
			return nil
		}
		return next(ctx, cmd)
	}
}

func (slotsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// nodeOps returns the data commands each master executed so far (INFO commandstats less
// administrative commands), or an embedded server's command count.
func (t *target) nodeOps(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, m := range t.embedded {
		out[m.Addr()] = uint64(m.CommandCount())
	}
	if len(t.embedded) > 0 {
		return out, nil
	}
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		s, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		var n uint64
		sc := bufio.NewScanner(strings.NewReader(s))
		for sc.Scan() {
			name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
			cmd, _, _ := strings.Cut(strings.TrimPrefix(name, "cmdstat_"), "|")
			if !ok || !strings.HasPrefix(name, "cmdstat_") || strings.Contains(" info ping cluster config client hello command script ", " "+cmd+" ") {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			v, _ := strconv.ParseUint(calls, 10, 64)
			n += v
		}
		mu.Lock()
		out[c.Options().Addr] = n
		mu.Unlock()
		return nil
	}
	if c, ok := t.client.(*redis.ClusterClient); ok {
		return out, c.ForEachMaster(ctx, read)
	}
	return out, read(ctx, t.client.(*redis.Client))
}

// skew is max/mean of the per-node deltas, over every master.
func (t *target) skew(before, after map[string]uint64) (float64, []uint64) {
	d := make([]uint64, len(t.masters))
	var sum, hi uint64
	for i, a := range t.masters {
		d[i] = after[a] - before[a]
		sum += d[i]
		hi = max(hi, d[i])
	}
	if sum == 0 {
		return 1, d
	}
	return float64(hi) / (float64(sum) / float64(len(d))), d
}

func (t *target) close() {
	if t.client != nil {
		_ = t.client.Close()
	}
	if t.stop != nil {
		close(t.stop)
		t.wg.Wait()
	}
	for _, m := range t.embedded {
		m.Close()
	}
}
