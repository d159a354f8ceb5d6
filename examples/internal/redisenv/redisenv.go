// Package redisenv connects the examples to Redis: the servers named by REDIS_CLUSTER_ADDRS
// or REDIS_ADDR when set, otherwise an embedded in-process Redis (miniredis), so that every
// example runs with `go run` on a machine with only Go installed.
//
//	t, err := redisenv.Connect(ctx, redisenv.Options{})
//	if err != nil {
//		return err
//	}
//	defer t.Close()
//	fmt.Printf("running against: %s\n", t.Desc)
//
// REDIS_CLUSTER_ADDRS (comma-separated seed addresses of a Redis Cluster) wins over
// REDIS_ADDR (one standalone server). The clients have go-redis's stock options: an example
// shows the library as a service would use it, not tuned for the example.
//
// The embedded servers' TTLs follow the wall clock to within 50ms, as on a real server (a
// goroutine owned by the Target moves them forward). They have no cluster mode: with
// [Options.EmbeddedServers] above 1 the client routes hash slots, split in equal ranges,
// over them as a Redis Cluster client would, without MOVED redirections or replicas.
//
// The package is internal to the examples module: an example copied out of the repository
// takes this directory with it (or connects to its own Redis in its own way).
package redisenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Kind says what a Target runs against.
type Kind string

const (
	Standalone Kind = "standalone" // one real server, from REDIS_ADDR
	Cluster    Kind = "cluster"    // a real Redis Cluster, from REDIS_CLUSTER_ADDRS
	Embedded   Kind = "embedded"   // in-process miniredis servers that Connect started
)

// Options says how to set up the embedded default; a configured server ignores them.
type Options struct {
	// EmbeddedServers is how many in-process servers Connect starts when no server is
	// configured: with 1 the Client is a *redis.Client to it; with more it is a
	// *redis.ClusterClient that routes hash slots over them as over a cluster's masters.
	// Default: 1.
	EmbeddedServers int
}

// Target is the Redis an example runs against. Close releases it.
type Target struct {
	// Client is a *redis.Client (standalone, one embedded server) or a *redis.ClusterClient
	// (cluster, several embedded servers).
	Client redis.UniversalClient
	// Kind says whether the servers are real and whether they form a cluster.
	Kind Kind
	// Desc says, for a person, what the example runs against.
	Desc string
	// Masters lists the addresses of the servers that hold the Client's keys: the cluster's
	// masters (sorted), the standalone server, or the embedded servers in slot order.
	Masters []string

	embedded []*miniredis.Miniredis
	extra    []redis.UniversalClient
	stop     chan struct{}
	wg       sync.WaitGroup
}

// Connect returns the Redis named by the environment after a PING to each of its masters,
// or starts the embedded default. An error names the variable whose servers did not answer.
func Connect(ctx context.Context, o Options) (*Target, error) {
	if v := strings.TrimSpace(os.Getenv("REDIS_CLUSTER_ADDRS")); v != "" {
		return connectCluster(ctx, v)
	}
	if v := strings.TrimSpace(os.Getenv("REDIS_ADDR")); v != "" {
		c := redis.NewClient(&redis.Options{Addr: v})
		if err := c.Ping(ctx).Err(); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("REDIS_ADDR=%s: %w", v, err)
		}
		return &Target{Client: c, Kind: Standalone, Masters: []string{v},
			Desc: fmt.Sprintf("standalone Redis at %s, from REDIS_ADDR", v)}, nil
	}
	return connectEmbedded(max(o.EmbeddedServers, 1))
}

func connectCluster(ctx context.Context, seeds string) (*Target, error) {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(seeds, ",")})
	t := &Target{Client: c, Kind: Cluster,
		Desc: fmt.Sprintf("Redis Cluster at %s, from REDIS_CLUSTER_ADDRS", seeds)}
	var mu sync.Mutex
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		mu.Lock()
		t.Masters = append(t.Masters, m.Options().Addr)
		mu.Unlock()
		return m.Ping(ctx).Err()
	}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("REDIS_CLUSTER_ADDRS=%s: %w", seeds, err)
	}
	sort.Strings(t.Masters)
	return t, nil
}

// Faulty returns a second client to the same servers as client whose connections go
// through dialer (a fault injector), with go-redis's own retries turned off so that a
// dropped reply reaches the caller as an error instead of being retried silently. The
// caller closes it. It panics on a client that is neither a *redis.Client nor a
// *redis.ClusterClient.
func Faulty(client redis.UniversalClient, dialer func(ctx context.Context, network, addr string) (net.Conn, error)) redis.UniversalClient {
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
	panic(fmt.Sprintf("redisenv: unknown client type %T", client))
}

// Close closes the Client and the clients Shards made, then stops the embedded servers.
func (t *Target) Close() {
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

// ttlTick is how often the embedded servers' TTLs move forward.
const ttlTick = 50 * time.Millisecond
