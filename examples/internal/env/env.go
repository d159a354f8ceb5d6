// Package env connects the examples to Redis: the servers named by REDIS_CLUSTER_ADDRS or
// REDIS_ADDR when set, otherwise an embedded in-process Redis (miniredis), so that every
// example runs with `go run` on a machine with only Go installed.
package env

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Options say what an example needs from its Redis.
type Options struct {
	// EmbeddedNodes is the number of in-process servers of the embedded default. With more
	// than one, they form a client-routed cluster: each owns an equal range of hash slots
	// and the client sends every command to the owner of its key's slot, as on a Redis
	// Cluster (miniredis has no cluster mode of its own). Default: 1, a standalone server.
	EmbeddedNodes int
	// NeedsRealRedis names the commands the example needs that the embedded server lacks.
	// When it is set and no server is configured, Connect fails and says which commands.
	NeedsRealRedis []string
}

// Target is the Redis an example runs against.
type Target struct {
	// Client is a *redis.Client (standalone) or a *redis.ClusterClient (cluster, and the
	// embedded default with several nodes).
	Client redis.UniversalClient
	// Kind is "standalone", "cluster" or "embedded".
	Kind string
	// Desc says, for a person, what the example runs against.
	Desc string

	embedded []*miniredis.Miniredis
	masters  []string
	extra    []redis.UniversalClient
	stop     chan struct{}
	wg       sync.WaitGroup
}

// Connect returns the Redis named by the environment, or starts the embedded default.
// REDIS_CLUSTER_ADDRS (comma-separated seed addresses of a Redis Cluster) wins over
// REDIS_ADDR (one standalone server).
func Connect(ctx context.Context, o Options) (*Target, error) {
	if v := strings.TrimSpace(os.Getenv("REDIS_CLUSTER_ADDRS")); v != "" {
		addrs := strings.Split(v, ",")
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t := &Target{Client: c, Kind: "cluster"}
		if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.Ping(ctx).Err()
		}); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("env: REDIS_CLUSTER_ADDRS=%s: %w", v, err)
		}
		var mu sync.Mutex
		_ = c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			t.masters = append(t.masters, m.Options().Addr)
			return nil
		})
		sort.Strings(t.masters)
		t.Desc = fmt.Sprintf("Redis Cluster at %s (%d masters), from REDIS_CLUSTER_ADDRS", v, len(t.masters))
		return t, nil
	}
	if v := strings.TrimSpace(os.Getenv("REDIS_ADDR")); v != "" {
		c := redis.NewClient(&redis.Options{Addr: v})
		if err := c.Ping(ctx).Err(); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("env: REDIS_ADDR=%s: %w", v, err)
		}
		return &Target{Client: c, Kind: "standalone", masters: []string{v},
			Desc: fmt.Sprintf("standalone Redis at %s, from REDIS_ADDR", v)}, nil
	}
	if len(o.NeedsRealRedis) > 0 {
		return nil, fmt.Errorf("env: this example needs %s, which the embedded server (miniredis) "+
			"does not implement: set REDIS_ADDR or REDIS_CLUSTER_ADDRS to a real Redis 7+",
			strings.Join(o.NeedsRealRedis, ", "))
	}
	return embedded(o.EmbeddedNodes)
}

func embedded(n int) (*Target, error) {
	if n < 1 {
		n = 1
	}
	t := &Target{Kind: "embedded"}
	for range n {
		m, err := t.startEmbedded()
		if err != nil {
			t.Close()
			return nil, err
		}
		t.masters = append(t.masters, m.Addr())
	}
	if n == 1 {
		t.Client = redis.NewClient(&redis.Options{Addr: t.masters[0]})
		t.Desc = "embedded in-process Redis (miniredis, standalone); set REDIS_ADDR or " +
			"REDIS_CLUSTER_ADDRS to use a real server"
		return t, nil
	}
	slots := splitSlots(t.masters)
	c := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) { return slots, nil },
		// Without a cluster mode there is no MOVED to follow and no replica to read.
		RouteRandomly: false,
	})
	c.AddHook(clusterSlotsHook{slots: slots})
	t.Client = c
	t.Desc = fmt.Sprintf("embedded in-process Redis: %d miniredis servers, hash slots split "+
		"in equal ranges and routed by the client (miniredis has no cluster mode); set "+
		"REDIS_ADDR or REDIS_CLUSTER_ADDRS to use a real server", n)
	return t, nil
}

// ttlTick is how often the embedded servers' TTLs are moved forward by the time that passed.
const ttlTick = 100 * time.Millisecond

// startEmbedded starts one in-process server. Its TTLs follow the wall clock, as on a real
// server (leases and cached values expire), to within ttlTick: a goroutine owned by the
// Target moves them forward (miniredis's own ClockTTL costs a scan of every key on every
// command).
func (t *Target) startEmbedded() (*miniredis.Miniredis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("env: starting the embedded server: %w", err)
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

// splitSlots gives each address an equal range of the 16384 hash slots.
func splitSlots(addrs []string) []redis.ClusterSlot {
	const count = 16384
	per := count / len(addrs)
	out := make([]redis.ClusterSlot, len(addrs))
	for i, a := range addrs {
		lo, hi := i*per, (i+1)*per-1
		if i == len(addrs)-1 {
			hi = count - 1
		}
		out[i] = redis.ClusterSlot{Start: lo, End: hi, Nodes: []redis.ClusterNode{{ID: a, Addr: a}}}
	}
	return out
}

// clusterSlotsHook answers CLUSTER SLOTS with the client-side slot map, which is what the
// servers would answer if they were a cluster; every other command goes to the servers.
type clusterSlotsHook struct{ slots []redis.ClusterSlot }

func (clusterSlotsHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h clusterSlotsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c, ok := cmd.(*redis.ClusterSlotsCmd); ok {
			c.SetVal(h.slots)
			return nil
		}
		return next(ctx, cmd)
	}
}

func (clusterSlotsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// FaultyClient returns a second client to the same servers whose connections go through
// dialer (a fault injector), with go-redis's own retries turned off so that a dropped reply
// reaches the caller as an error instead of being retried silently.
func (t *Target) FaultyClient(dialer func(ctx context.Context, network, addr string) (net.Conn, error)) redis.UniversalClient {
	return t.Faulty(t.Client, dialer)
}

// Faulty is FaultyClient for any client of this target (one of Shards, for example).
func (t *Target) Faulty(client redis.UniversalClient, dialer func(ctx context.Context, network, addr string) (net.Conn, error)) redis.UniversalClient {
	switch c := client.(type) {
	case *redis.ClusterClient:
		o := *c.Options()
		o.Dialer, o.MaxRetries, o.MaxRedirects = dialer, -1, -1
		fc := redis.NewClusterClient(&o)
		if len(t.embedded) > 1 && client == t.Client {
			fc.AddHook(clusterSlotsHook{slots: splitSlots(t.masters)})
		}
		return fc
	case *redis.Client:
		o := *c.Options()
		o.Dialer, o.MaxRetries = dialer, -1
		return redis.NewClient(&o)
	}
	return nil
}

// Shards returns one client per name, each a separate keyspace, for examples that place
// data on several shards (package routing names a shard per Redis deployment):
//   - embedded: one more in-process server per shard;
//   - standalone (REDIS_ADDR): databases 1, 2, ... of the server (the target keeps DB 0);
//   - cluster (REDIS_CLUSTER_ADDRS): the first shard is the cluster itself and the others
//     are databases 1, 2, ... of the standalone server in REDIS_ADDR, which must then be
//     set as well (a cluster has only database 0).
//
// The clients are closed by Close.
func (t *Target) Shards(names ...string) (map[string]redis.UniversalClient, string, error) {
	out := map[string]redis.UniversalClient{}
	var where []string
	switch {
	case t.Kind == "embedded":
		for _, n := range names {
			m, err := t.startEmbedded()
			if err != nil {
				return nil, "", err
			}
			c := redis.NewClient(&redis.Options{Addr: m.Addr()})
			t.extra = append(t.extra, c)
			out[n] = c
			where = append(where, n+": embedded server "+m.Addr())
		}
	case t.Kind == "standalone":
		o := t.Client.(*redis.Client).Options()
		for i, n := range names {
			c := redis.NewClient(&redis.Options{Addr: o.Addr, DB: i + 1})
			t.extra = append(t.extra, c)
			out[n] = c
			where = append(where, fmt.Sprintf("%s: database %d of %s", n, i+1, o.Addr))
		}
	default:
		addr := strings.TrimSpace(os.Getenv("REDIS_ADDR"))
		if addr == "" && len(names) > 1 {
			return nil, "", fmt.Errorf("env: %d shards need separate keyspaces; a cluster has one: "+
				"set REDIS_ADDR to a standalone server as well for the other shards", len(names))
		}
		out[names[0]] = t.Client
		where = append(where, names[0]+": the cluster")
		for i, n := range names[1:] {
			c := redis.NewClient(&redis.Options{Addr: addr, DB: i + 1})
			t.extra = append(t.extra, c)
			out[n] = c
			where = append(where, fmt.Sprintf("%s: database %d of %s", n, i+1, addr))
		}
	}
	return out, strings.Join(where, "; "), nil
}

// Masters returns the addresses of the servers that own data, sorted.
func (t *Target) Masters() []string { return append([]string(nil), t.masters...) }

// Cluster returns the cluster client, or nil on a standalone server.
func (t *Target) Cluster() *redis.ClusterClient {
	c, _ := t.Client.(*redis.ClusterClient)
	return c
}

// NodeOps returns the number of data commands each master has executed so far: the sum of
// INFO commandstats calls, less administrative commands (INFO, PING, CLUSTER, CONFIG,
// CLIENT, HELLO, COMMAND, SCRIPT), or the command count of an embedded server (which
// includes the handshakes of new connections). Take the
// difference of two readings to measure a stretch of work.
func (t *Target) NodeOps(ctx context.Context) (map[string]uint64, error) {
	out := make(map[string]uint64, len(t.masters))
	if len(t.embedded) > 0 {
		for _, m := range t.embedded {
			out[m.Addr()] = uint64(m.CommandCount())
		}
		return out, nil
	}
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		s, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		n, err := dataCalls(s)
		if err != nil {
			return err
		}
		mu.Lock()
		out[c.Options().Addr] = n
		mu.Unlock()
		return nil
	}
	switch c := t.Client.(type) {
	case *redis.ClusterClient:
		return out, c.ForEachMaster(ctx, read)
	case *redis.Client:
		return out, read(ctx, c)
	}
	return nil, errors.New("env: unknown client type")
}

// adminCommands are left out of NodeOps.
var adminCommands = []string{"info", "ping", "cluster", "config", "client", "hello", "command", "script"}

// dataCalls sums the calls of INFO commandstats, less adminCommands.
func dataCalls(info string) (uint64, error) {
	var total uint64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		cmd, _, _ := strings.Cut(strings.TrimPrefix(name, "cmdstat_"), "|")
		admin := false
		for _, a := range adminCommands {
			admin = admin || cmd == a
		}
		if admin {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("env: bad commandstats line %q: %w", line, err)
				}
				total += n
			}
		}
	}
	return total, sc.Err()
}

// Close closes the client and stops the embedded servers.
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

// Skew returns max/mean of the per-node deltas after-before, over every master (idle ones
// count), and the deltas themselves in the order of Masters.
func (t *Target) Skew(before, after map[string]uint64) (float64, []uint64) {
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

// Checker prints each invariant's verdict and remembers the broken ones, so that an example
// exits non-zero when any broke. Its zero value is ready to use.
type Checker struct {
	mu     sync.Mutex
	broken []string
}

// Check records msg as a broken invariant unless ok, and prints the verdict.
func (c *Checker) Check(ok bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if ok {
		fmt.Printf("  ok    %s\n", msg)
		return
	}
	fmt.Printf("  FAIL  %s\n", msg)
	c.mu.Lock()
	c.broken = append(c.broken, msg)
	c.mu.Unlock()
}

// Exit prints the summary line and exits 1 when an invariant broke.
func (c *Checker) Exit(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.broken) > 0 {
		fmt.Printf("\n%s: %d invariant(s) broken\n", name, len(c.broken))
		os.Exit(1)
	}
	fmt.Printf("\n%s: every invariant held\n", name)
}
