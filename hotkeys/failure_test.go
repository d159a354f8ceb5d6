package hotkeys_test

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestProbeFailureIsNotUnsupported separates "the server cannot tell" from "the server did
// not answer": a lost reply or a dead server is an ordinary error, never ErrUnsupported,
// and the probe works again once the server is back.
func TestProbeFailureIsNotUnsupported(t *testing.T) {
	ctx := t.Context()
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{Config: []string{"maxmemory-policy", "allkeys-lfu"}})
	inj := faults.New()
	c := srv.Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil); o.MaxRetries = -1 })
	p, err := hotkeys.NewProbe(c)
	require.NoError(t, err)
	prefix := celebritytest.NewPrefix(t)
	keys := writeAndRead(t, srv.AdminClient(t), prefix)

	inj.DropReply(faults.Match{Command: "OBJECT"}, 1)
	_, err = p.Freq(ctx, keys)
	require.Error(t, err, "a lost OBJECT FREQ reply fails the call")
	require.NotErrorIs(t, err, hotkeys.ErrUnsupported)
	got, err := p.Freq(ctx, keys)
	require.NoError(t, err, "the next call succeeds")
	require.Equal(t, prefix+"hot", got[0].Key)

	inj.DropReply(faults.Match{Command: "CONFIG"}, 1)
	_, err = p.Capabilities(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, hotkeys.ErrUnsupported)

	srv.Kill()
	_, err = p.ScanTop(ctx, hotkeys.ScanOptions{})
	require.Error(t, err, "a dead server fails the scan")
	require.NotErrorIs(t, err, hotkeys.ErrUnsupported)

	srv.Restart(t)
	caps, err := p.Capabilities(ctx)
	require.NoError(t, err)
	require.True(t, caps[0].ObjectFreq, "the restarted server keeps its LFU policy")
}

// TestClusterShardsFollowFailoverOnRefresh promotes a replica: the slot map names the old
// master until Refresh, then the new one; a failed Refresh keeps the last good map.
func TestClusterShardsFollowFailoverOnRefresh(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel() // a dedicated cluster: overlap its start-up with the other parallel tests
	ctx := t.Context()
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Replicas: true})
	cc := cl.Client(t)
	cs, err := hotkeys.NewClusterShards(ctx, cc)
	require.NoError(t, err)

	key := celebritytest.NewPrefix(t) + "celebrity"
	oldMaster := cl.MasterOf(key)
	require.Equal(t, oldMaster.Addr(), cs.Shard(key))

	idx := -1
	for i, m := range cl.Masters() {
		if m == oldMaster {
			idx = i
		}
	}
	require.GreaterOrEqual(t, idx, 0)
	cl.Failover(t, idx)
	newMaster := cl.MasterOf(key)
	require.NotEqual(t, oldMaster.Addr(), newMaster.Addr())
	require.Equal(t, oldMaster.Addr(), cs.Shard(key), "the map is a snapshot until Refresh")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, cs.Refresh(cancelled))
	require.Equal(t, oldMaster.Addr(), cs.Shard(key), "a failed Refresh keeps the last map")

	require.Eventually(t, func() bool {
		return cs.Refresh(ctx) == nil && cs.Shard(key) == newMaster.Addr()
	}, 30*time.Second, 100*time.Millisecond, "after Refresh the key belongs to the promoted replica")
	require.Contains(t, cs.Masters(), newMaster.Addr())
	require.NotContains(t, cs.Masters(), oldMaster.Addr())
}
