package migrate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// RollbackSafe follows the bulk of the warmed keys, not the longest-lived one: one key
// with no TTL (or a long one) among short-lived ones does not keep a rollback "safe" after
// the rest expired, and no rollback is offered beyond the rollback window.
func TestCacheRollbackSafeFollowsTheKeysThatMatter(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	mv, err := migrate.NewCache(e.control, migrate.CacheOptions{Shards: cacheShards(e), Prefix: e.prefix, Clock: now,
		RollbackWindow: time.Hour})
	require.NoError(t, err)
	for _, tc := range []struct {
		name     string
		ttls     []time.Duration // 0: no TTL
		after    time.Duration
		safeThen bool
	}{
		{"one key without TTL", []time.Duration{time.Minute, time.Minute, time.Minute, 0}, 2 * time.Minute, false},
		{"one long TTL", []time.Duration{time.Minute, time.Minute, time.Minute, 50 * time.Minute}, 2 * time.Minute, false},
		{"most keys alive", []time.Duration{time.Minute, 30 * time.Minute, 30 * time.Minute, 0}, 2 * time.Minute, true},
		{"no TTL past the window", []time.Duration{0, 0}, 61 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tenant := fmt.Sprintf("%s-%s", e.prefix, tc.name)
			src := e.table().BucketOwner(uint32(hashing.Bucket(tenant, testBuckets)))
			var keys []string
			for i, ttl := range tc.ttls {
				k := fmt.Sprintf("%s:k%d", tenant, i)
				require.NoError(t, e.clients[src].(redis.Cmdable).Set(ctx, k, "v", ttl).Err())
				keys = append(keys, k)
			}
			st, err := mv.Move(ctx, migrate.CacheSpec{Tenant: tenant, Target: other(src), Keys: keys})
			require.NoError(t, err)
			require.True(t, st.RollbackSafe)
			clock.Add(int64(tc.after / time.Millisecond))
			st, err = mv.Status(ctx, st.ID)
			require.NoError(t, err)
			require.Equal(t, tc.safeThen, st.RollbackSafe)
			clock.Add(-int64(tc.after / time.Millisecond))
			_, err = mv.Finish(ctx, st.ID)
			require.NoError(t, err)
		})
	}
}

// A cache move whose caller died while warming is listed by Unfinished and ended by Resume:
// Aborted (tenant on its source, lock free) if its flip was not published, Flipped if it was.
func TestCacheMoveInterruptedIsListedAndResumed(t *testing.T) {
	for _, at := range []string{"before publish", "after publish"} {
		t.Run(at, func(t *testing.T) {
			srv := celebritytest.Shards(t, 3)
			e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{
				"a": srv[1].Client(t), "b": srv[2].Client(t),
			}, routing.ShardOptions{})
			ctx := testkit.Ctx(t)
			tenant := e.prefix + "-interrupted"
			src := e.table().BucketOwner(uint32(hashing.Bucket(tenant, testBuckets)))
			dst := other(src)
			arg := routing.Keys{Prefix: e.prefix}.Channel()
			if at == "after publish" {
				arg = "flipgen"
			}
			h := newHold(arg)
			ctl := srv[0].Client(t)
			ctl.AddHook(h)
			dying, err := migrate.NewCache(ctl, migrate.CacheOptions{Shards: cacheShards(e), Prefix: e.prefix,
				NewID: func() string { return "interrupted" }})
			require.NoError(t, err)
			dctx, die := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { _, err := dying.Move(dctx, migrate.CacheSpec{Tenant: tenant, Target: dst}); done <- err }()
			h.wait(t)
			die()
			require.ErrorIs(t, <-done, context.Canceled)

			list, err := e.coordinator(migrate.Options{}).Unfinished(ctx)
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.True(t, list[0].Cache)
			require.Equal(t, migrate.CacheWarming, list[0].State)
			require.Equal(t, routing.TenantUnit(tenant), list[0].Unit)

			mv, err := migrate.NewCache(e.control, migrate.CacheOptions{Shards: cacheShards(e), Prefix: e.prefix})
			require.NoError(t, err)
			st, err := mv.Resume(ctx, "interrupted")
			require.NoError(t, err)
			if at == "before publish" {
				require.Equal(t, migrate.Aborted, st.State)
				_, overridden := e.table().Overrides[tenant]
				require.False(t, overridden)
				again, err := mv.Move(ctx, migrate.CacheSpec{Tenant: tenant, Target: dst})
				require.NoError(t, err, "the lock is free")
				require.Equal(t, migrate.CacheFlipped, again.State)
				_, err = mv.Finish(ctx, again.ID)
				require.NoError(t, err)
			} else {
				require.Equal(t, migrate.CacheFlipped, st.State)
				require.Equal(t, dst, e.table().Overrides[tenant])
				require.False(t, st.RollbackSafe, "the warm-up is unknown: no rollback offered")
				list, err = e.coordinator(migrate.Options{}).Unfinished(ctx)
				require.NoError(t, err)
				require.Len(t, list, 1, "a flipped move awaits Finish or Rollback")
				_, err = mv.Finish(ctx, st.ID)
				require.NoError(t, err)
			}
			list, err = e.coordinator(migrate.Options{}).Unfinished(ctx)
			require.NoError(t, err)
			require.Empty(t, list)
		})
	}
}
