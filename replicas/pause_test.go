package replicas_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

func TestPausedMasterReadsFallBackAndWritesReportIt(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel() // a dedicated cluster: runs alongside the other dedicated-cluster test
	c := celebritytest.NewCluster(t, celebritytest.ClusterOptions{})
	paused := c.Masters()[0]
	t.Cleanup(paused.Resume) // before the cluster stops
	client := c.Client(t, func(o *redis.ClusterOptions) {
		o.ReadTimeout = 300 * time.Millisecond
		o.WriteTimeout = 300 * time.Millisecond
		o.MaxRedirects = -1
	})
	// A key whose logical key lives elsewhere: the paused node holds only one of its copies.
	key := ""
	for i := 0; key == ""; i++ {
		if k := "k" + strconv.Itoa(i); c.MasterOf(k) != paused {
			key = k
		}
	}
	prefix := celebritytest.NewPrefix(t)
	probe := newReplicator(t, client, replicas.Options{Copies: 3, Prefix: prefix})
	ck, err := probe.CopyKeys(testkit.Ctx(t), key)
	require.NoError(t, err)
	onPaused := -1
	for i, k := range ck {
		if c.MasterOf(k) == paused {
			onPaused = i
		}
	}
	require.GreaterOrEqual(t, onPaused, 0)
	// Every read tries the paused node's copy first.
	r := newReplicator(t, client, replicas.Options{
		Copies: 3, Prefix: prefix, Hot: []string{key}, RefreshInterval: -1,
		Rand: func() uint64 { return uint64(onPaused) },
	})
	ctx := testkit.Ctx(t)
	require.NoError(t, r.Set(ctx, key, []byte("v1"), 1, time.Minute))

	paused.Pause()
	it, err := r.Get(ctx, key)
	require.NoError(t, err, "the read falls back to another copy")
	require.Equal(t, "v1", string(it.Value))
	require.Equal(t, uint64(1), r.Stats().Fallbacks)

	err = r.Set(ctx, key, []byte("v2"), 2, time.Minute)
	var pw *replicas.PartialWriteError
	require.ErrorAs(t, err, &pw)
	require.Len(t, pw.Failed, 1)
	require.Equal(t, ck[onPaused], pw.Failed[0].Key)
	require.Equal(t, onPaused, pw.Failed[0].Index)
	require.Equal(t, 3, pw.Written, "the logical key and two copies took the write")
	require.Equal(t, uint64(1), r.Stats().PartialWrites)

	it, err = r.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, replicas.Item{Value: []byte("v2"), Version: 2}, it, "the fallback reads a copy that took the write")

	paused.Resume()
	// The copy that missed the write still holds version 1 (documented); the next write
	// brings it forward.
	require.Eventually(t, func() bool {
		return r.Set(ctx, key, []byte("v3"), 3, time.Minute) == nil
	}, 30*time.Second, 50*time.Millisecond)
	for _, k := range append(ck, r.PrimaryKey(key)) {
		v, _, data := stored(t, client, k)
		require.Equal(t, uint64(3), v, k)
		require.Equal(t, "v3", data, k)
	}
}
