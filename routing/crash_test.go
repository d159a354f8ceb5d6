package routing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// A shard that crashes loses exactly what its persistence loses. With AOF (appendfsync
// always) the ownership record, the record and the op record survive, so a retry finds its
// first result. Without persistence the ownership record is gone too, so the restarted,
// empty shard refuses the write instead of accepting it as if it still owned the bucket.
func TestShardCrashKeepsOrRefusesButNeverForgetsSilently(t *testing.T) {
	celebritytest.Long(t)
	for _, tc := range []struct {
		name string
		aof  bool
	}{{"aof", true}, {"no-persistence", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t)
			srv := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: tc.aof})
			r := f.router(t, routing.Options{PollInterval: time.Hour}, map[string]routing.ShardClient{"a": srv.Client(t)})
			ctx := testkit.Ctx(t)
			tb := routing.EvenTable(1, 4, "a")
			tb.Shards = shardNames
			require.NoError(t, f.store(t).Publish(ctx, tb))
			awaitGen(t, r, 1)
			_, err := r.Provision(ctx)
			require.NoError(t, err)
			first, err := r.Do(ctx, "tenant", "op-1", routing.PutIf("seat", "alice", 0))
			require.NoError(t, err)
			require.Equal(t, routing.Result{Applied: true, Version: 1}, first)

			srv.Kill()
			srv.Restart(t)

			if tc.aof {
				res, err := r.Do(ctx, "tenant", "op-1", routing.PutIf("seat", "alice", 0))
				require.NoError(t, err)
				require.Equal(t, routing.Result{Applied: true, Version: 1, Replayed: true}, res)
				return
			}
			short, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err = r.Do(short, "tenant", "op-1", routing.PutIf("seat", "alice", 0))
			var stale *routing.StaleRouteError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, routing.StateNone, stale.Owner.State, "the empty shard holds no ownership record")
			n, err := srv.AdminClient(t).DBSize(ctx).Result()
			require.NoError(t, err)
			require.Zero(t, n, "the refused write left nothing on the restarted shard")
		})
	}
}
