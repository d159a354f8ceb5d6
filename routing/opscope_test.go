package routing_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// Operation IDs are per tenant: two tenants of one bucket both run "confirm-1", each is
// applied once and each retry replays its own tenant's first result. Op records stored
// under the bare op ID (written before op IDs were scoped) still replay for their own
// tenant (one naming a field of the tenant, and one of the oldest form naming no field) and
// do not stand in the way of another tenant using the same ID.
func TestOperationIDsArePerTenant(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		s := newShard(t, "a", c, prefix(t), routing.ShardOptions{})
		u := routing.BucketUnit(3)
		open(t, s, u, 1)
		k := routingfmt.Keys(s.Keys().Tag(u))
		admin := celebritytest.AdminOf(t, c)

		a, err := s.Exec(ctx, u, 1, "acme", "confirm-1", routing.PutIf("seat", "alice", 0))
		require.NoError(t, err)
		g, err := s.Exec(ctx, u, 1, "globex", "confirm-1", routing.PutIf("seat", "gina", 0))
		require.NoError(t, err, "a neighbour's confirm-1 is another operation")
		require.Equal(t, routing.Result{Applied: true, Version: 1}, g)
		again, err := s.Exec(ctx, u, 1, "acme", "confirm-1", routing.PutIf("seat", "alice", 0))
		require.NoError(t, err)
		require.Equal(t, routing.Result{Applied: a.Applied, Version: a.Version, Replayed: true}, again)
		_, err = s.Exec(ctx, u, 1, "globex", "confirm-1", routing.Put("other", "x"))
		require.ErrorIs(t, err, routing.ErrConflict, "an op ID reused within one tenant is still a conflict")
		for tenant, want := range map[string]string{"acme": "alice", "globex": "gina"} {
			rec, ok, err := s.Get(ctx, u, 1, tenant, "seat")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, want, rec.Value)
		}

		// Records from before the scoping: acme's legacy-1 (naming its field) and old-1 (the
		// oldest form, no field), stored under the bare op IDs.
		first, err := s.Exec(ctx, u, 1, "acme", "tmp", routing.Put("legacy", "v"))
		require.NoError(t, err)
		stored, err := admin.HGet(ctx, k.Ops, routing.OpKey("acme", "tmp")).Result()
		require.NoError(t, err)
		op, err := routingfmt.DecodeOpRecord(stored)
		require.NoError(t, err)
		require.NoError(t, admin.HDel(ctx, k.Ops, routing.OpKey("acme", "tmp")).Err())
		require.NoError(t, admin.HSet(ctx, k.Ops, "legacy-1", stored).Err())
		op.Field = ""
		require.NoError(t, admin.HSet(ctx, k.Ops, "old-1", routingfmt.EncodeOpRecord(op)).Err())
		for _, id := range []string{"legacy-1", "old-1"} {
			res, err := s.Exec(ctx, u, 1, "acme", id, routing.Put("legacy", "v"))
			require.NoError(t, err, id)
			require.Equal(t, routing.Result{Applied: true, Version: first.Version, Replayed: true}, res, "%s replays for its tenant", id)
		}
		res, err := s.Exec(ctx, u, 1, "globex", "legacy-1", routing.Put("legacy", "g"))
		require.NoError(t, err)
		require.Equal(t, routing.Result{Applied: true, Version: 1}, res, "acme's legacy record is not globex's")
	})
}
