package replicas_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestWaitReplicasReportsUnacknowledgedWritesAndSurvivesFailover: with WaitReplicas, a Set
// whose master's replica is stalled reports ErrNotReplicated instead of nil; a Set that
// returns nil was on the replica, so a forced failover of that master (its replica taking
// over without the old master's agreement, as after a crash) keeps it.
func TestWaitReplicasReportsUnacknowledgedWritesAndSurvivesFailover(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel() // a dedicated cluster
	c := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Replicas: true})
	client := c.Client(t)
	key := celebritytest.NewPrefix(t) + "post:7"
	// A live replica acknowledges within WaitTimeout even on a loaded machine (v1 below
	// must be acknowledged at once); the paused one never does.
	r := newReplicator(t, client, replicas.Options{Copies: 3, Hot: []string{key},
		WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	ctx := testkit.Ctx(t)
	require.NoError(t, r.Set(ctx, key, []byte("v1"), 1, time.Hour))

	owner := -1
	for i, m := range c.Masters() {
		if m == c.MasterOf(r.PrimaryKey(key)) {
			owner = i
		}
	}
	require.GreaterOrEqual(t, owner, 0)
	replica := c.Replicas()[owner]
	replica.Pause()
	err := r.Set(ctx, key, []byte("v2"), 2, time.Hour)
	require.ErrorIs(t, err, replicas.ErrNotReplicated, "the stalled replica did not acknowledge v2")
	require.Positive(t, r.Stats().Unreplicated)
	replica.Resume()

	require.Eventually(t, func() bool {
		return r.Set(ctx, key, []byte("v3"), 3, time.Hour) == nil
	}, 20*time.Second, 50*time.Millisecond, "once the replica is back, writes are acknowledged")

	old := c.Masters()[owner]
	old.Pause()
	t.Cleanup(old.Resume)
	c.ForceFailover(t, owner)
	old.Resume() // it comes back as a replica and redirects the client
	require.NoError(t, r.Refresh(ctx))
	require.Eventually(t, func() bool {
		it, err := r.Get(ctx, key)
		return err == nil && it.Version == 3
	}, 20*time.Second, 50*time.Millisecond, "the acknowledged v3 survived the failover")
	for range 20 {
		it, err := r.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, replicas.Item{Value: []byte("v3"), Version: 3}, it)
	}
}
