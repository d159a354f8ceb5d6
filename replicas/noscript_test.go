package replicas_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestWaitedWritesRunAfterTheScriptCacheIsFlushed: with WaitReplicas, a Set on a server whose
// script cache was emptied (as after a restart or the promotion of a replica) still writes
// the primary record and every copy: the scripts are loaded again and the writes sent once
// more. Only the WAIT, with no replica to answer it, reports ErrNotReplicated.
func TestWaitedWritesRunAfterTheScriptCacheIsFlushed(t *testing.T) {
	t.Parallel() // a dedicated server: its script cache is flushed
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	client := srv.Client(t)
	key := celebritytest.NewPrefix(t) + "post:8"
	r := newReplicator(t, client, replicas.Options{Copies: 3, Hot: []string{key},
		WaitReplicas: 1, WaitTimeout: 10 * time.Millisecond})
	ctx := testkit.Ctx(t)
	copies, err := r.CopyKeys(ctx, key)
	require.NoError(t, err)
	for v := uint64(1); v <= 2; v++ {
		value := fmt.Sprint("v", v)
		require.NoError(t, srv.AdminClient(t).ScriptFlush(ctx).Err())
		err := r.Set(ctx, key, []byte(value), v, time.Hour)
		require.ErrorIs(t, err, replicas.ErrNotReplicated, "no replica acknowledges the write")
		require.NotContains(t, err.Error(), "NOSCRIPT")
		var pw *replicas.PartialWriteError
		if errors.As(err, &pw) {
			for _, f := range pw.Failed {
				require.ErrorIs(t, f.Err, replicas.ErrNotReplicated, "copy %s was written", f.Key)
			}
		}
		for _, k := range append([]string{r.PrimaryKey(key)}, copies...) {
			raw, err := client.Get(ctx, k).Result()
			require.NoError(t, err, k)
			ok, version, tombstone, data := replicas.Decode(raw)
			require.True(t, ok, k)
			require.Equal(t, v, version, k)
			require.False(t, tombstone, k)
			require.Equal(t, value, data, k)
		}
	}
}

// TestWaitedWritesWorkUnderTheACLRule: with WaitReplicas, a write on a server that does not
// hold the scripts yet works for a user holding only ACLRule (which has no SCRIPT LOAD):
// the calls answered NOSCRIPT are sent again with their sources. Only the WAIT, with no
// replica to answer it, reports ErrNotReplicated.
func TestWaitedWritesWorkUnderTheACLRule(t *testing.T) {
	t.Parallel() // a dedicated server: none of the scripts is loaded on it
	prefix := celebritytest.NewPrefix(t)
	key := prefix + "post:9"
	o := replicas.Options{Copies: 3, Prefix: prefix, Hot: []string{key}, WaitReplicas: 1, WaitTimeout: 10 * time.Millisecond}
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	r := newReplicator(t, srv.User(t, "replicas-wait", replicas.ACLRule(o)...), o)
	ctx := testkit.Ctx(t)
	err := r.Set(ctx, key, []byte("v1"), 1, time.Hour)
	require.ErrorIs(t, err, replicas.ErrNotReplicated, "no replica acknowledges the write")
	require.NotContains(t, err.Error(), "NOSCRIPT")
	require.NotContains(t, err.Error(), "NOPERM")
	copies, err := r.CopyKeys(ctx, key)
	require.NoError(t, err)
	admin := srv.AdminClient(t)
	for _, k := range append([]string{r.PrimaryKey(key)}, copies...) {
		raw, err := admin.Get(ctx, k).Result()
		require.NoError(t, err, k)
		ok, version, _, data := replicas.Decode(raw)
		require.True(t, ok, k)
		require.Equal(t, uint64(1), version, k)
		require.Equal(t, "v1", data, k)
	}
}
