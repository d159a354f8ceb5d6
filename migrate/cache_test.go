package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// cacheReader is cache-aside over the routed shards: it routes the tenant by the current
// table, reads the key there, and on a miss loads from the source of truth (counted) and
// fills the cache.
type cacheReader struct {
	e      *env
	loads  atomic.Int64
	tenant string
}

func (r *cacheReader) get(ctx context.Context, key string) (string, error) {
	t, err := r.e.store.Load(ctx)
	if err != nil {
		return "", err
	}
	shard, ok := t.Overrides[r.tenant]
	if !ok {
		shard = t.BucketOwner(uint32(hashing.Bucket(r.tenant, uint64(t.Buckets))))
	}
	c := r.e.clients[shard].(redis.Cmdable)
	v, err := c.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		r.loads.Add(1)
		v = "db:" + key
		err = c.Set(ctx, key, v, time.Minute).Err()
	}
	return v, err
}

func (r *cacheReader) stampede(t testing.TB, keys []string, readers int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, k := range keys {
				v, err := r.get(context.Background(), k)
				if err != nil || v != "db:"+k {
					t.Errorf("read %s: %q %v", k, v, err)
				}
			}
		}()
	}
	wg.Wait()
}

func cacheShards(e *env) map[string]migrate.ShardClient { return e.clients }

func TestCacheMoveWarmFlipRollbackWithoutStampede(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	mv, err := migrate.NewCache(e.control, migrate.CacheOptions{Shards: cacheShards(e), Prefix: e.prefix, Clock: now})
	require.NoError(t, err)

	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			tenant := fmt.Sprintf("%s-hot-%v", e.prefix, warm)
			r := &cacheReader{e: e, tenant: tenant}
			keys := make([]string, 50)
			for i := range keys {
				keys[i] = fmt.Sprintf("%s:k%d", tenant, i)
			}
			r.stampede(t, keys, 1)
			require.Equal(t, int64(len(keys)), r.loads.Load(), "cold start loads every key once")
			src := e.table().BucketOwner(uint32(hashing.Bucket(tenant, testBuckets)))
			dst := map[string]string{"a": "b", "b": "a"}[src]

			var hot []string
			if warm {
				hot = append(keys, tenant+":absent")
			}
			st, err := mv.Move(ctx, migrate.CacheSpec{Tenant: tenant, Target: dst, Keys: hot})
			require.NoError(t, err)
			require.Equal(t, migrate.CacheFlipped, st.State)
			require.Equal(t, dst, e.table().Overrides[tenant])
			before := r.loads.Load()
			r.stampede(t, keys, 16)
			if !warm {
				// The reference: a flip without warming sends every read to a cold shard.
				require.GreaterOrEqual(t, r.loads.Load()-before, int64(len(keys)))
				t.Logf("unwarmed flip: %d source loads for %d keys, 16 readers", r.loads.Load()-before, len(keys))
				_, err = mv.Finish(ctx, st.ID)
				require.NoError(t, err)
				return
			}
			require.Equal(t, len(keys), st.Warmed)
			require.Equal(t, 1, st.Missing)
			require.Zero(t, r.loads.Load()-before, "no source stampede on the flip")
			require.True(t, st.RollbackSafe)
			ttl, err := e.clients[dst].(redis.Cmdable).PTTL(ctx, keys[0]).Result()
			require.NoError(t, err)
			require.Positive(t, ttl, "the copy keeps the TTL")

			// Rollback within the window: a flip back to the still-warm source.
			back, err := mv.Rollback(ctx, st.ID)
			require.NoError(t, err)
			require.Equal(t, migrate.CacheRolledBack, back.State)
			require.Greater(t, back.BackGen, st.FlipGen)
			_, overridden := e.table().Overrides[tenant]
			require.False(t, overridden, "the tenant routes by its bucket again")
			r.stampede(t, keys, 16)
			require.Zero(t, r.loads.Load()-before, "the rollback lands on the warm old copy")

			// Move again, then let the old copy expire: rollback is reported unsafe.
			st, err = mv.Move(ctx, migrate.CacheSpec{Tenant: tenant, Target: dst, Keys: keys})
			require.NoError(t, err)
			_, err = mv.Move(ctx, migrate.CacheSpec{Tenant: tenant, Target: src, Keys: keys})
			require.ErrorIs(t, err, migrate.ErrBusy)
			clock.Add(int64(2 * time.Minute / time.Millisecond))
			st, err = mv.Status(ctx, st.ID)
			require.NoError(t, err)
			require.False(t, st.RollbackSafe)
			gen := e.table().Generation
			_, err = mv.Rollback(ctx, st.ID)
			require.ErrorIs(t, err, migrate.ErrRollbackUnsafe)
			require.Equal(t, gen, e.table().Generation, "an unsafe rollback changes nothing")
			_, err = mv.Finish(ctx, st.ID)
			require.NoError(t, err)
		})
	}
	_, err = mv.Move(ctx, migrate.CacheSpec{Tenant: "", Target: "a"})
	require.ErrorIs(t, err, migrate.ErrInvalid)
	_, err = mv.Move(ctx, migrate.CacheSpec{Tenant: "x", Target: "nowhere"})
	require.ErrorIs(t, err, migrate.ErrInvalid)
}

func TestCacheMoveRefusesATenantThatIsNotUTF8(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	mv, err := migrate.NewCache(e.control, migrate.CacheOptions{Shards: cacheShards(e), Prefix: e.prefix})
	require.NoError(t, err)
	gen := e.table().Generation
	_, err = mv.Move(ctx, migrate.CacheSpec{Tenant: "cafe\xe9", Target: "b"})
	require.ErrorIs(t, err, migrate.ErrInvalid)
	require.Equal(t, gen, e.table().Generation, "nothing published")
	co := e.coordinator(migrate.Options{})
	_, err = co.Start(ctx, migrate.Spec{Unit: routing.TenantUnit("cafe\xe9"), Target: "b"})
	require.ErrorIs(t, err, migrate.ErrInvalid)
}
