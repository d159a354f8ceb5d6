package main

// This file connects the example to Redis: the servers named by REDIS_CLUSTER_ADDRS or
// REDIS_ADDR when set, otherwise an embedded in-process Redis (miniredis), so that the
// example runs with `go run` on a machine with only Go installed. It is plain code, meant to
// be copied along with the example.

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// target is the Redis the example runs against.
type target struct {
	// Client is a *redis.Client (standalone, embedded) or a *redis.ClusterClient.
	Client redis.UniversalClient
	// Kind is "standalone", "cluster" or "embedded".
	Kind string
	// Desc says, for a person, what the example runs against.
	Desc string

	embedded []*miniredis.Miniredis
	stop     chan struct{}
	wg       sync.WaitGroup
}

// connect returns the Redis named by the environment, or starts the embedded default.
// REDIS_CLUSTER_ADDRS (comma-separated seed addresses of a Redis Cluster) wins over
// REDIS_ADDR (one standalone server).
func connect(ctx context.Context) (*target, error) {
	if v := strings.TrimSpace(os.Getenv("REDIS_CLUSTER_ADDRS")); v != "" {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(v, ",")})
		if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.Ping(ctx).Err()
		}); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("REDIS_CLUSTER_ADDRS=%s: %w", v, err)
		}
		return &target{Client: c, Kind: "cluster",
			Desc: fmt.Sprintf("Redis Cluster at %s, from REDIS_CLUSTER_ADDRS", v)}, nil
	}
	if v := strings.TrimSpace(os.Getenv("REDIS_ADDR")); v != "" {
		c := redis.NewClient(&redis.Options{Addr: v})
		if err := c.Ping(ctx).Err(); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("REDIS_ADDR=%s: %w", v, err)
		}
		return &target{Client: c, Kind: "standalone",
			Desc: fmt.Sprintf("standalone Redis at %s, from REDIS_ADDR", v)}, nil
	}
	t := &target{Kind: "embedded", Desc: "embedded in-process Redis (miniredis, standalone); " +
		"set REDIS_ADDR or REDIS_CLUSTER_ADDRS to use a real server"}
	m, err := t.startEmbedded()
	if err != nil {
		return nil, err
	}
	t.Client = redis.NewClient(&redis.Options{Addr: m.Addr()})
	return t, nil
}

// startEmbedded starts one in-process server whose TTLs follow the wall clock to within
// 100ms, as on a real server: a goroutine owned by the target moves them forward.
func (t *target) startEmbedded() (*miniredis.Miniredis, error) {
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
		tick := time.NewTicker(100 * time.Millisecond)
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

// faulty returns a second client to the same servers as client whose connections go through
// dialer (a fault injector), with go-redis's own retries turned off so that a dropped reply
// reaches the caller as an error instead of being retried silently.
func (t *target) faulty(client redis.UniversalClient, dialer func(ctx context.Context, network, addr string) (net.Conn, error)) redis.UniversalClient {
	switch c := client.(type) {
	case *redis.ClusterClient:
		o := *c.Options()
		o.Dialer, o.MaxRetries, o.MaxRedirects = dialer, -1, -1
		return redis.NewClusterClient(&o)
	case *redis.Client:
		o := *c.Options()
		o.Dialer, o.MaxRetries = dialer, -1
		return redis.NewClient(&o)
	}
	panic(fmt.Sprintf("unknown client type %T", client))
}

// close closes the client and stops the embedded server.
func (t *target) close() {
	if t.Client != nil {
		_ = t.Client.Close()
	}
	if t.stop != nil {
		close(t.stop)
		t.wg.Wait()
	}
	for _, m := range t.embedded {
		m.Close()
	}
}
