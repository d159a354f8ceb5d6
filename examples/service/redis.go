package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// target is the Redis the service runs against: REDIS_CLUSTER_ADDRS, REDIS_ADDR, or three
// embedded in-process servers (miniredis) that the client routes by hash slot as if they
// were a cluster. The clients have go-redis's stock options.
type target struct {
	client   redis.UniversalClient
	desc     string
	embedded []*miniredis.Miniredis
	stop     chan struct{}
	wg       sync.WaitGroup
}

func connect(ctx context.Context) (*target, error) {
	if v := strings.TrimSpace(os.Getenv("REDIS_CLUSTER_ADDRS")); v != "" {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(v, ",")})
		if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.Ping(ctx).Err()
		}); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("REDIS_CLUSTER_ADDRS=%s: %w", v, err)
		}
		return &target{client: c, desc: "Redis Cluster at " + v}, nil
	}
	if v := strings.TrimSpace(os.Getenv("REDIS_ADDR")); v != "" {
		c := redis.NewClient(&redis.Options{Addr: v})
		if err := c.Ping(ctx).Err(); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("REDIS_ADDR=%s: %w", v, err)
		}
		return &target{client: c, desc: "standalone Redis at " + v}, nil
	}
	t := &target{stop: make(chan struct{})}
	var addrs []string
	for range 3 {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			t.close()
			return nil, err
		}
		t.embedded = append(t.embedded, m)
		addrs = append(addrs, m.Addr())
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
	slots := splitSlots(addrs)
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
