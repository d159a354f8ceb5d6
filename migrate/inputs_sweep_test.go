package migrate_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// TestMigrationIDsRoundTripOrAreRefused: Start journals a move under each ID that a mangling
// encoder would break or merge ("a:b" and "a_b", "a\x00b" and "a") and Status reads that
// move back under exactly that ID; an ID with braces or over 200 bytes is refused with
// ErrInvalid naming the migration ID, and nothing is journaled.
func TestMigrationIDsRoundTripOrAreRefused(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	co := e.coordinator(migrate.Options{})
	ok := []string{"\xff\xfe", "\ufffd", "a\x00b", "a", "a:b", "a_b", ":", "x:j:y"}
	for i, id := range ok {
		u := routing.BucketUnit(uint32(i))
		e.openOwner(u)
		target := map[string]string{"a": "b", "b": "a"}[e.table().Owner(u)]
		_, err := co.Start(ctx, migrate.Spec{ID: id, Unit: u, Target: target})
		require.NoError(t, err, "ID %q", id)
	}
	for i, id := range ok {
		s, err := co.Status(ctx, id)
		require.NoError(t, err, "ID %q", id)
		require.Equal(t, id, s.ID)
		require.Equal(t, routing.BucketUnit(uint32(i)), s.Unit, "ID %q", id)
	}
	admin := celebritytest.AdminOf(t, e.control.(redis.UniversalClient))
	before, err := admin.DBSize(ctx).Result()
	require.NoError(t, err)
	for _, id := range []string{"{", "}", "{tag}", strings.Repeat("m", 1<<20)} {
		_, err := co.Start(ctx, migrate.Spec{ID: id, Unit: routing.BucketUnit(15), Target: "a"})
		require.ErrorIs(t, err, migrate.ErrInvalid, "ID %.20q", id)
		require.ErrorContains(t, err, "migration ID must be 1..200 bytes without braces", "ID %.20q", id)
		require.Less(t, len(err.Error()), 300, "the error quotes a short prefix of the ID")
	}
	// A tenant over routing.MaxTenantLen bytes is refused by every tenant move, quoted short.
	long := strings.Repeat("t", 1<<20)
	for name, start := range map[string]func() error{
		"carve": func() error { _, err := co.StartCarve(ctx, migrate.CarveSpec{Tenant: long, Target: "b"}); return err },
		"fold":  func() error { _, err := co.StartFold(ctx, migrate.FoldSpec{Tenant: long}); return err },
		"split": func() error {
			_, err := co.StartSplit(ctx, migrate.SplitSpec{Tenant: long, Targets: []string{"a", "b"}})
			return err
		},
	} {
		err := start()
		require.ErrorIs(t, err, migrate.ErrInvalid, name)
		require.ErrorContains(t, err, "tenant must be 1..256 bytes", name)
		require.Less(t, len(err.Error()), 300, "%s: the error quotes a short prefix of the tenant", name)
	}
	after, err := admin.DBSize(ctx).Result()
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused Start journals nothing")
}

// TestCacheMoveIDsRoundTripOrAreRefused: a cache move takes IDs of any length (unlike the
// Coordinator's 200 bytes) and bytes, and Status and Finish find the move under exactly that
// ID; an ID with braces is refused with ErrInvalid naming the migration ID.
func TestCacheMoveIDsRoundTripOrAreRefused(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	mv, err := migrate.NewCache(e.control, migrate.CacheOptions{Shards: cacheShards(e), Prefix: e.prefix})
	require.NoError(t, err)
	for i, id := range []string{strings.Repeat("m", 1<<20), "\xff\xfe", "a\x00b", "a:b", "{x}"} {
		tenant := e.prefix + "-t" + string(rune('a'+i))
		src := e.table().BucketOwner(uint32(hashing.Bucket(tenant, testBuckets)))
		dst := map[string]string{"a": "b", "b": "a"}[src]
		st, err := mv.Move(ctx, migrate.CacheSpec{ID: id, Tenant: tenant, Target: dst})
		if id == "{x}" {
			require.ErrorIs(t, err, migrate.ErrInvalid)
			require.ErrorContains(t, err, "migration ID must not contain braces")
			require.Empty(t, e.table().Overrides[tenant], "a refused move flips nothing")
			continue
		}
		require.NoError(t, err, "ID %.20q", id)
		require.Equal(t, id, st.ID)
		got, err := mv.Status(ctx, id)
		require.NoError(t, err, "ID %.20q", id)
		require.Equal(t, id, got.ID)
		require.Equal(t, dst, e.table().Overrides[tenant], "ID %.20q", id)
		_, err = mv.Finish(ctx, id)
		require.NoError(t, err, "ID %.20q", id)
	}
}
