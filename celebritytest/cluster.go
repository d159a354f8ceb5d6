package celebritytest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/slot"
)

// ClusterOptions configure a test cluster.
type ClusterOptions struct {
	// Masters is the number of masters, 1..MaxMasters. Default: 3 (DefaultMasters).
	Masters int
	// Replicas adds one replica per master, for failover tests.
	Replicas bool
	// AOF turns on the append-only file (appendfsync always) on every node.
	AOF bool
	// Config holds extra configuration for every node, as ServerOptions.Config does.
	Config []string
}

// DefaultMasters is the number of masters of a cluster whose ClusterOptions.Masters is zero,
// and of the shared cluster.
const DefaultMasters = 3

// MaxMasters bounds ClusterOptions.Masters.
const MaxMasters = 16

// Cluster is a Redis Cluster of ClusterOptions.Masters masters (and optionally one replica
// each), formed with CLUSTER ADDSLOTSRANGE, CLUSTER MEET and CLUSTER REPLICATE. Master i
// owns the i-th of equal slot ranges (the last one takes the remainder) until a failover
// moves them to its replica. Its methods are safe for concurrent use.
type Cluster struct {
	mu       sync.Mutex
	masters  []*Server
	replicas []*Server
}

// formTimeout bounds how long forming or re-stabilising a cluster may take.
const formTimeout = 30 * time.Second

func startCluster(opts ClusterOptions) (c *Cluster, err error) {
	if opts.Masters == 0 {
		opts.Masters = DefaultMasters
	}
	if opts.Masters < 1 || opts.Masters > MaxMasters {
		return nil, fmt.Errorf("celebritytest: ClusterOptions.Masters must be 1..%d, got %d", MaxMasters, opts.Masters)
	}
	c = &Cluster{}
	defer func() {
		if err != nil {
			for _, s := range c.nodes() {
				_ = s.stop()
			}
		}
	}()
	so := ServerOptions{AOF: opts.AOF, Config: opts.Config, cluster: true}
	for range opts.Masters {
		s, err := track(so)
		if err != nil {
			return c, err
		}
		c.masters = append(c.masters, s)
		if opts.Replicas {
			r, err := track(so)
			if err != nil {
				return c, err
			}
			c.replicas = append(c.replicas, r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	return c, c.form(ctx)
}

// form joins the servers into one cluster: it assigns the slots, introduces the nodes,
// attaches the replicas and waits until the cluster is stable.
func (c *Cluster) form(ctx context.Context) error {
	if err := c.assignSlots(ctx); err != nil {
		return err
	}
	if err := c.meetAll(ctx); err != nil {
		return err
	}
	if err := c.attachReplicas(ctx); err != nil {
		return err
	}
	return c.waitStable(ctx)
}

// nodeAdmin returns a client of s alone, without retries, for the cluster's setup commands.
func nodeAdmin(s *Server) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
}

// assignSlots gives every node its own config epoch, as redis-cli --cluster create does (a
// cluster formed with every epoch 0 resolves the collisions by bumping epochs after it
// formed, and a replica that has not heard of its master's bump yet takes over with an epoch
// the others refuse), and each master its range of the hash slots (see slotRange).
func (c *Cluster) assignSlots(ctx context.Context) error {
	for i, s := range c.nodes() {
		cl := nodeAdmin(s)
		err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err()
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("celebritytest: CLUSTER SET-CONFIG-EPOCH on %s: %w", s.Addr(), err)
		}
	}
	for i, m := range c.masters {
		cl := nodeAdmin(m)
		lo, hi := slotRange(i, len(c.masters))
		err := cl.ClusterAddSlotsRange(ctx, lo, hi).Err()
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("celebritytest: CLUSTER ADDSLOTSRANGE on %s: %w", m.Addr(), err)
		}
	}
	return nil
}

// meetAll introduces every node to the first master and waits until every node knows every
// other.
func (c *Cluster) meetAll(ctx context.Context) error {
	first := nodeAdmin(c.masters[0])
	defer first.Close()
	for _, s := range c.nodes()[1:] {
		if err := first.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.port, s.busPort).Err(); err != nil {
			return fmt.Errorf("celebritytest: CLUSTER MEET %s: %w", s.Addr(), err)
		}
	}
	n := len(c.nodes())
	return c.waitFor(ctx, "every node to know every other", func(cl *redis.Client) (bool, error) {
		nodes, err := cl.ClusterNodes(ctx).Result()
		return strings.Count(strings.TrimSpace(nodes), "\n")+1 == n && !strings.Contains(nodes, "handshake"), err
	})
}

// attachReplicas makes each replica replicate its master.
func (c *Cluster) attachReplicas(ctx context.Context) error {
	for i, r := range c.replicas {
		m := nodeAdmin(c.masters[i])
		id, err := m.Do(ctx, "CLUSTER", "MYID").Text()
		_ = m.Close()
		if err != nil {
			return fmt.Errorf("celebritytest: CLUSTER MYID on %s: %w", c.masters[i].Addr(), err)
		}
		rc := nodeAdmin(r)
		err = rc.ClusterReplicate(ctx, id).Err()
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("celebritytest: CLUSTER REPLICATE on %s: %w", r.Addr(), err)
		}
	}
	return nil
}

// slotRange returns the first and last slot of master i of n.
func slotRange(i, n int) (lo, hi int) {
	per := slot.Count / n
	lo, hi = i*per, (i+1)*per-1
	if i == n-1 {
		hi = slot.Count - 1
	}
	return lo, hi
}

// nodes returns masters then replicas.
func (c *Cluster) nodes() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(append([]*Server(nil), c.masters...), c.replicas...)
}

// waitFor polls every running node until cond holds on all of them.
func (c *Cluster) waitFor(ctx context.Context, what string, cond func(*redis.Client) (bool, error)) error {
	var lastErr error
	for {
		ok := true
		for _, s := range c.nodes() {
			if !s.Running() || s.Paused() {
				continue // a crashed or paused node has no say until it is back
			}
			cl := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
			good, err := cond(cl)
			_ = cl.Close()
			if err != nil {
				lastErr = err
			}
			if !good || err != nil {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("celebritytest: waiting for %s: %w (last error: %v)", what, ctx.Err(), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitStable waits until every node reports cluster_state:ok and the same slot map, with
// each master's replica linked. On timeout the error names the last node that disagreed and
// what it reported.
func (c *Cluster) waitStable(ctx context.Context) error {
	want := c.expectedSlots()
	var last string
	err := c.waitFor(ctx, "cluster_state:ok and an agreed slot map", func(cl *redis.Client) (bool, error) {
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			last = cl.Options().Addr + " does not report cluster_state:ok"
			return false, err
		}
		//lint:ignore SA1019 CLUSTER SLOTS lists replicas per range, which is what is compared.
		slots, err := cl.ClusterSlots(ctx).Result()
		if err != nil {
			return false, err
		}
		got := describeSlots(slots)
		last = fmt.Sprintf("%s sees %q", cl.Options().Addr, got)
		return got == want, nil
	})
	if err != nil {
		return fmt.Errorf("%w; want %q, last seen: %s", err, want, last)
	}
	return nil
}

// expectedSlots describes the slot map the cluster should converge to.
func (c *Cluster) expectedSlots() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ranges []redis.ClusterSlot
	for i, m := range c.masters {
		lo, hi := slotRange(i, len(c.masters))
		r := redis.ClusterSlot{Start: lo, End: hi, Nodes: []redis.ClusterNode{{Addr: m.Addr()}}}
		if len(c.replicas) > 0 && c.replicas[i].Running() && !c.replicas[i].Paused() {
			r.Nodes = append(r.Nodes, redis.ClusterNode{Addr: c.replicas[i].Addr()})
		}
		ranges = append(ranges, r)
	}
	return describeSlots(ranges)
}

func describeSlots(slots []redis.ClusterSlot) string {
	var parts []string
	for _, r := range slots {
		var addrs []string
		for _, n := range r.Nodes {
			addrs = append(addrs, n.Addr)
		}
		if len(addrs) > 1 {
			slices.Sort(addrs[1:])
		}
		parts = append(parts, fmt.Sprintf("%d-%d:%s", r.Start, r.End, strings.Join(addrs, ",")))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// Addrs returns the current masters' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, m := range c.Masters() {
		out = append(out, m.Addr())
	}
	return out
}

// Masters returns the current masters, in slot order.
func (c *Cluster) Masters() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Server(nil), c.masters...)
}

// Replicas returns the current replicas; Replicas()[i] replicates Masters()[i].
func (c *Cluster) Replicas() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Server(nil), c.replicas...)
}

// MasterOf returns the master currently owning key's slot.
func (c *Cluster) MasterOf(key string) *Server {
	ms := c.Masters()
	i := min(int(slot.Of(key))/(slot.Count/len(ms)), len(ms)-1)
	return ms[i]
}

// Client returns a cluster client seeded with the masters' addresses, closed when the test
// ends. opts adjust the options before the client is created. Under LimitedEnv the client
// authenticates as LimitedUser.
func (c *Cluster) Client(t testing.TB, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	t.Helper()
	user, pass := limitedAuth()
	return c.client(t, append([]func(*redis.ClusterOptions){func(o *redis.ClusterOptions) { o.Username, o.Password = user, pass }}, opts...))
}

// AdminClient is Client as the default user, also under LimitedEnv: for what a test does
// as the cluster's administrator (FLUSHALL on every master, CONFIG SET, reading keys it
// does not own).
func (c *Cluster) AdminClient(t testing.TB, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	t.Helper()
	return c.client(t, opts)
}

func (c *Cluster) client(t testing.TB, opts []func(*redis.ClusterOptions)) *redis.ClusterClient {
	t.Helper()
	o := &redis.ClusterOptions{Addrs: c.Addrs()}
	for _, f := range opts {
		f(o)
	}
	cl := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Failover promotes the replica of master i with CLUSTER FAILOVER (a coordinated manual
// failover: the replica catches up with its master first) and waits until every node agrees
// on the new slot map. Afterwards Masters()[i] is the promoted node and Replicas()[i] the
// old master. It needs a cluster started with Replicas.
func (c *Cluster) Failover(t testing.TB, i int) {
	t.Helper()
	c.failover(t, i, "")
}

// ForceFailover promotes the replica of master i with CLUSTER FAILOVER TAKEOVER, without
// the old master's agreement: use it when the master is paused or killed. Writes the replica
// had not received are lost, as on a real crash.
func (c *Cluster) ForceFailover(t testing.TB, i int) {
	t.Helper()
	c.failover(t, i, "TAKEOVER")
}

func (c *Cluster) failover(t testing.TB, i int, mode string) {
	t.Helper()
	reps := c.Replicas()
	if i < 0 || i >= len(reps) {
		t.Fatalf("celebritytest: Failover(%d): the cluster has %d replicas", i, len(reps))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*formTimeout)
	defer cancel()
	c.mu.Lock()
	c.masters[i], c.replicas[i] = c.replicas[i], c.masters[i]
	c.mu.Unlock()
	for {
		if err := promote(ctx, reps[i].Addr(), mode); err != nil {
			t.Fatalf("celebritytest: failover of master %d: %v", i, err)
		}
		// The other nodes may refuse the promoted node's claim (an epoch they know to be
		// higher) and turn it back into a replica: then it is asked again, with the epoch it
		// has learnt meanwhile.
		attempt, cancelAttempt := context.WithTimeout(ctx, formTimeout/2)
		err := c.waitStable(attempt)
		cancelAttempt()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("celebritytest: after failover of master %d: %v", i, err)
		}
	}
}

// promote sends CLUSTER FAILOVER [mode] to the replica at addr until it reports the master
// role (at once if it does already). A coordinated failover the master does not complete in
// time (a busy machine) is abandoned by the replica, so it is asked again.
func promote(ctx context.Context, addr, mode string) error {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rc.Close()
	args := []any{"CLUSTER", "FAILOVER"}
	if mode != "" {
		args = append(args, mode)
	}
	isMaster := func() (bool, error) {
		role, err := rc.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master", err
	}
	for {
		if ok, _ := isMaster(); ok {
			return nil
		}
		if err := rc.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("CLUSTER FAILOVER on %s: %w", addr, err)
		}
		for asked := time.Now(); time.Since(asked) < 10*time.Second; {
			ok, err := isMaster()
			if ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s did not become a master: %w (last error: %v)", addr, ctx.Err(), err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}
