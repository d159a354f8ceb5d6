package celebritytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	if pidfile := os.Getenv(crashEnv); pidfile != "" {
		crashChild(pidfile)
	}
	RegisterRule(kitRule, func(prefix string) []string { return []string{"~" + prefix + "*", "+get", "+set"} })
	Main(m)
}

func TestStandaloneServesCommands(t *testing.T) {
	t.Parallel()
	c := Standalone(t).Client(t)
	key := NewPrefix(t) + "k"
	require.NoError(t, c.Set(context.Background(), key, "v", 0).Err())
	require.Equal(t, "v", c.Get(context.Background(), key).Val())
}

func TestShardsAreSeparateServers(t *testing.T) {
	t.Parallel()
	shards := Shards(t, 3)
	require.Len(t, shards, 3)
	require.Equal(t, Standalone(t).Addr(), shards[0].Addr())
	key := NewPrefix(t) + "only-on-first"
	ctx := context.Background()
	require.NoError(t, shards[0].Client(t).Set(ctx, key, 1, 0).Err())
	for _, s := range shards[1:] {
		require.NotEqual(t, shards[0].Addr(), s.Addr())
		require.Equal(t, int64(0), s.Client(t).Exists(ctx, key).Val(), "key leaked to %s", s.Addr())
	}
}

func TestClusterHasThreeMastersAgreeingOnSlots(t *testing.T) {
	t.Parallel()
	cl := SharedCluster(t)
	require.Len(t, cl.Masters(), 3)
	ctx := context.Background()
	c := cl.Client(t)
	// Keys on every master: the client follows the slot map and every write lands.
	for i := range 300 {
		key := NewPrefix(t) + string(rune('a'+i%26)) + strings.Repeat("x", i%7)
		require.NoError(t, c.Set(ctx, key, i, 0).Err())
	}
	for _, m := range cl.Masters() {
		info, err := m.Client(t).ClusterInfo(ctx).Result()
		require.NoError(t, err)
		require.Contains(t, info, "cluster_state:ok")
		require.Contains(t, info, "cluster_known_nodes:3")
		n, err := m.Client(t).DBSize(ctx).Result()
		require.NoError(t, err)
		require.Positive(t, n, "master %s holds no keys", m.Addr())
	}
	// MasterOf agrees with the server.
	key := NewPrefix(t) + "owner"
	require.NoError(t, c.Set(ctx, key, 1, 0).Err())
	require.Equal(t, int64(1), cl.MasterOf(key).Client(t).Exists(ctx, key).Val())
}

func TestKilledServerKeepsAcknowledgedWritesThroughAOF(t *testing.T) {
	t.Parallel()
	s := NewServer(t, ServerOptions{AOF: true})
	ctx := context.Background()
	c := s.Client(t)
	for i := range 100 {
		require.NoError(t, c.Incr(ctx, "counter").Err(), "write %d", i)
	}
	s.Kill()
	require.False(t, s.Running())
	require.Error(t, c.Ping(ctx).Err(), "a killed server answered")
	s.Restart(t)
	require.Equal(t, "100", c.Get(ctx, "counter").Val())
	_, err := os.Stat(filepath.Join(s.Dir(), "appendonlydir"))
	require.NoError(t, err)
}

func TestServerWithoutAOFLosesWritesOnKill(t *testing.T) {
	// The control for the test above: without AOF nothing survives, so that test is not
	// passing by accident.
	t.Parallel()
	s := NewServer(t, ServerOptions{})
	ctx := context.Background()
	c := s.Client(t)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	s.Restart(t)
	require.Equal(t, redis.Nil, c.Get(ctx, "k").Err())
}

func TestPausedServerResumes(t *testing.T) {
	t.Parallel()
	s := NewServer(t, ServerOptions{})
	// The timeout ends the Ping to the paused server; the first Ping, on a loaded machine,
	// must come back within it.
	c := s.Client(t, func(o *redis.Options) { o.ReadTimeout = time.Second; o.MaxRetries = -1 })
	ctx := context.Background()
	require.NoError(t, c.Ping(ctx).Err())
	s.Pause()
	err := c.Ping(ctx).Err()
	require.Error(t, err, "a paused server answered")
	s.Resume()
	require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 30*time.Second, 20*time.Millisecond)
}

func TestFailoverPromotesReplica(t *testing.T) {
	t.Parallel()
	cl := NewCluster(t, ClusterOptions{Replicas: true})
	ctx := context.Background()
	c := cl.Client(t)
	key := "{" + "failover" + "}k"
	require.NoError(t, c.Set(ctx, key, "before", 0).Err())
	i := 0
	for j, m := range cl.Masters() {
		if m == cl.MasterOf(key) {
			i = j
		}
	}
	oldMaster, replica := cl.Masters()[i], cl.Replicas()[i]
	// WAIT makes the write reach the replica before the failover.
	require.Equal(t, int64(1), oldMaster.Client(t).Wait(ctx, 1, 5*time.Second).Val())
	cl.Failover(t, i)
	require.Equal(t, replica, cl.Masters()[i])
	role, err := replica.Client(t).Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	require.Equal(t, "master", role[0])
	role, err = oldMaster.Client(t).Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	require.Equal(t, "slave", role[0])
	require.Eventually(t, func() bool { return c.Get(ctx, key).Val() == "before" }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, c.Set(ctx, key, "after", 0).Err())
	require.Equal(t, "after", replica.Client(t).Get(ctx, key).Val(), "the write did not go to the promoted replica")
}

// TestRestoreSnapshotForgetsLaterWrites proves a restore brings the server back to the moment
// of the snapshot: writes acknowledged before it are there, writes after it are gone.
func TestRestoreSnapshotForgetsLaterWrites(t *testing.T) {
	s := NewServer(t, ServerOptions{AOF: true})
	c := s.Client(t, func(o *redis.Options) { o.MaxRetries = -1 })
	ctx := t.Context()
	require.NoError(t, c.Set(ctx, "before", "1", 0).Err())
	snap := s.Snapshot(t)
	require.NoError(t, c.Set(ctx, "after", "2", 0).Err())

	s.RestoreSnapshot(t, snap)
	c2 := s.Client(t)
	require.Equal(t, "1", c2.Get(ctx, "before").Val())
	require.ErrorIs(t, c2.Get(ctx, "after").Err(), redis.Nil)
}

// TestUserIsHeldToItsRules proves a User can run what its rules allow and gets NOPERM for
// any other key or command, on a standalone server and on every node of a cluster.
func TestUserIsHeldToItsRules(t *testing.T) {
	ctx := t.Context()
	check := func(t *testing.T, c redis.Cmdable) {
		require.NoError(t, c.Set(ctx, "app:{u}:a", "1", 0).Err())
		require.Equal(t, "1", c.Get(ctx, "app:{u}:a").Val())
		for i := range 20 { // keys on every master of a cluster
			require.NoError(t, c.Set(ctx, fmt.Sprintf("app:%d", i), "1", 0).Err())
		}
		err := c.Set(ctx, "other:{u}:a", "1", 0).Err()
		require.ErrorContains(t, err, "NOPERM", "a key outside the pattern")
		err = c.Del(ctx, "app:{u}:a").Err()
		require.ErrorContains(t, err, "NOPERM", "a command outside the rules")
	}
	t.Run("standalone", func(t *testing.T) {
		check(t, Standalone(t).User(t, "limited-"+t.Name(), "~app:*", "+get", "+set"))
	})
	t.Run("cluster", func(t *testing.T) {
		check(t, SharedCluster(t).User(t, "limited-"+t.Name(), "~app:*", "+get", "+set"))
	})
}

// TestClusterOfTwoMastersFailsOver proves Masters sets the cluster's size and that the last
// master's range (which takes the remainder of the slots) fails over like any other.
func TestClusterOfTwoMastersFailsOver(t *testing.T) {
	cl := NewCluster(t, ClusterOptions{Masters: 2, Replicas: true})
	require.Len(t, cl.Masters(), 2)
	require.Len(t, cl.Replicas(), 2)
	ctx := t.Context()
	c := cl.Client(t)
	var key string
	for i := 0; ; i++ {
		k := fmt.Sprintf("{n%d}k", i)
		if cl.MasterOf(k) == cl.Masters()[1] {
			key = k
			break
		}
	}
	require.NoError(t, c.Set(ctx, key, "before", 0).Err())
	require.Equal(t, int64(1), cl.Masters()[1].Client(t).Wait(ctx, 1, 5*time.Second).Val())
	promoted := cl.Replicas()[1]
	cl.Failover(t, 1)
	require.Equal(t, promoted, cl.Masters()[1])
	require.Equal(t, promoted, cl.MasterOf(key))
	require.Eventually(t, func() bool { return c.Get(ctx, key).Val() == "before" }, 30*time.Second, 20*time.Millisecond)
}

// TestNewClusterRefusesTooManyMasters proves an out-of-range size fails the test instead of
// being clamped or skipped.
func TestNewClusterRefusesTooManyMasters(t *testing.T) {
	err := func() (err error) {
		_, err = startCluster(ClusterOptions{Masters: MaxMasters + 1})
		return err
	}()
	require.ErrorContains(t, err, "ClusterOptions.Masters must be 1..16, got 17")
}

// Prefix is one string per test (each subtest its own); NewPrefix is a new one per call.
func TestPrefixIsOnePerTestAndNewPrefixOnePerCall(t *testing.T) {
	p := Prefix(t)
	require.Equal(t, p, Prefix(t), "the same test, the same prefix")
	require.True(t, strings.HasPrefix(p, PrefixRoot))
	require.NotEqual(t, NewPrefix(t), NewPrefix(t), "a new prefix on every call")
	var sub string
	t.Run("sub", func(t *testing.T) {
		sub = Prefix(t)
		require.Equal(t, sub, Prefix(t))
		require.Contains(t, sub, "/sub:")
	})
	require.NotEqual(t, p, sub, "a subtest has its own prefix")
	require.Equal(t, p, Prefix(t))
}
