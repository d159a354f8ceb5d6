package main

// This file connects the example to Redis: the servers named by REDIS_CLUSTER_ADDRS or
// REDIS_ADDR when set, otherwise an embedded in-process Redis (miniredis), so that the
// example runs with `go run` on a machine with only Go installed. It is plain code, meant to
// be copied along with the example.

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

// target is the Redis the example runs against.
type target struct {
	// Client is a *redis.Client (standalone, embedded) or a *redis.ClusterClient.
	Client redis.UniversalClient
	// Kind is "standalone", "cluster" or "embedded".
	Kind string
	// Desc says, for a person, what the example runs against.
	Desc string

	embedded []*miniredis.Miniredis
	extra    []redis.UniversalClient
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

// shards returns one client per name, each a separate keyspace (package routing names a
// shard per Redis deployment):
//   - embedded: one more in-process server per shard;
//   - standalone (REDIS_ADDR): databases 1, 2, ... of the server (the target keeps DB 0);
//   - cluster (REDIS_CLUSTER_ADDRS): the first shard is the cluster itself and the others
//     are databases 1, 2, ... of the standalone server in REDIS_ADDR, which must then be
//     set as well (a cluster has only database 0).
//
// The clients are closed by close.
func (t *target) shards(names ...string) (map[string]redis.UniversalClient, string, error) {
	out := map[string]redis.UniversalClient{}
	var where []string
	add := func(n string, c redis.UniversalClient, desc string) {
		t.extra = append(t.extra, c)
		out[n] = c
		where = append(where, n+": "+desc)
	}
	switch t.Kind {
	case "embedded":
		for _, n := range names {
			m, err := t.startEmbedded()
			if err != nil {
				return nil, "", err
			}
			add(n, redis.NewClient(&redis.Options{Addr: m.Addr()}), "embedded server "+m.Addr())
		}
	case "standalone":
		addr := t.Client.(*redis.Client).Options().Addr
		for i, n := range names {
			add(n, redis.NewClient(&redis.Options{Addr: addr, DB: i + 1}), fmt.Sprintf("database %d of %s", i+1, addr))
		}
	default:
		addr := strings.TrimSpace(os.Getenv("REDIS_ADDR"))
		if addr == "" && len(names) > 1 {
			return nil, "", fmt.Errorf("%d shards need separate keyspaces; a cluster has one: "+
				"set REDIS_ADDR to a standalone server as well for the other shards", len(names))
		}
		out[names[0]] = t.Client
		where = append(where, names[0]+": the cluster")
		for i, n := range names[1:] {
			add(n, redis.NewClient(&redis.Options{Addr: addr, DB: i + 1}), fmt.Sprintf("database %d of %s", i+1, addr))
		}
	}
	return out, strings.Join(where, "; "), nil
}

// close closes the clients and stops the embedded servers.
func (t *target) close() {
	for _, c := range t.extra {
		_ = c.Close()
	}
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
