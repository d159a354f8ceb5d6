package redisenv

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// connectEmbedded starts n in-process servers: one behind a *redis.Client, or several behind
// a *redis.ClusterClient that routes hash slots over them.
func connectEmbedded(n int) (*Target, error) {
	t := &Target{Kind: Embedded}
	for range n {
		m, err := t.startEmbedded()
		if err != nil {
			t.Close()
			return nil, err
		}
		t.Masters = append(t.Masters, m.Addr())
	}
	if n == 1 {
		t.Client = redis.NewClient(&redis.Options{Addr: t.Masters[0]})
		t.Desc = "embedded in-process Redis (miniredis, standalone); " +
			"set REDIS_ADDR or REDIS_CLUSTER_ADDRS to use a real server"
		return t, nil
	}
	slots := splitSlots(t.Masters)
	c := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) { return slots, nil },
	})
	c.AddHook(slotsHook{slots})
	t.Client = c
	t.Desc = fmt.Sprintf("embedded in-process Redis: %d miniredis servers, hash slots split in equal ranges "+
		"and routed by the client (set REDIS_ADDR or REDIS_CLUSTER_ADDRS to use a real server)", n)
	return t, nil
}

// startEmbedded starts one in-process server whose TTLs follow the wall clock, as on a real
// server: a goroutine owned by the target moves them forward every ttlTick until Close.
func (t *Target) startEmbedded() (*miniredis.Miniredis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("starting the embedded server: %w", err)
	}
	t.embedded = append(t.embedded, m)
	if t.stop == nil {
		t.stop = make(chan struct{})
	}
	t.wg.Go(func() {
		last := time.Now()
		tick := time.NewTicker(ttlTick)
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
	return m, nil
}

// splitSlots gives each address an equal range of the 16384 hash slots, in order; the last
// takes the remainder.
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
