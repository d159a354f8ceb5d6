package replicas_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// readMany runs n reads of key through r from workers goroutines and fails on any error.
func readMany(t testing.TB, r *replicas.Replicator, key string, n, workers int) {
	t.Helper()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := r.Get(context.Background(), key); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
}

// pipelinedReads sends n GETs, in pipelines of 1000, of the physical key next returns.
func pipelinedReads(t testing.TB, c redis.UniversalClient, n int, next func() string) {
	t.Helper()
	ctx := context.Background()
	for done := 0; done < n; {
		pipe := c.Pipeline()
		for i := 0; i < 1000 && done < n; i++ {
			pipe.Get(ctx, next())
			done++
		}
		cmds, err := pipe.Exec(ctx)
		require.NoError(t, err)
		for _, cmd := range cmds {
			require.NoError(t, cmd.Err())
		}
	}
}

func TestPromotedKeyReadsSpreadOverMasters(t *testing.T) {
	c := celebritytest.SharedCluster(t)
	client := c.Client(t, func(o *redis.ClusterOptions) { o.PoolSize = 32 })
	key := celebritytest.NewPrefix(t) + "post:ronaldo"
	r := newReplicator(t, client, replicas.Options{Copies: 3})
	ctx := testkit.Ctx(t)
	require.NoError(t, r.Set(ctx, key, []byte("goal"), 1, 0))
	const reads = 100_000

	// Without replicas: every read goes to the key's one master.
	before := getCalls(t, c.Addrs())
	pipelinedReads(t, client, reads, func() string { return r.PrimaryKey(key) })
	plain := skew(before, getCalls(t, c.Addrs()))
	require.InDelta(t, 3.0, plain, 0.01, "without replicas one master serves everything")

	require.NoError(t, r.Promote(ctx, key))
	// 100,000 reads of the copies Get picks, batched in pipelines to keep the test fast...
	before = getCalls(t, c.Addrs())
	pipelinedReads(t, client, reads, func() string {
		k, err := r.PickKey(ctx, key)
		require.NoError(t, err)
		return k
	})
	after := getCalls(t, c.Addrs())
	spread := skew(before, after)
	t.Logf("pipelined: GET calls per master %v; max/mean %.3f with 3 copies, %.3f without", diff(before, after), spread, plain)
	require.LessOrEqual(t, spread, 1.1)

	// ...and 10,000 through Get itself.
	const getReads = 10_000
	before = getCalls(t, c.Addrs())
	readMany(t, r, key, getReads, 32)
	after = getCalls(t, c.Addrs())
	spread = skew(before, after)
	t.Logf("Get: GET calls per master %v; max/mean %.3f", diff(before, after), spread)
	require.LessOrEqual(t, spread, 1.1)
	s := r.Stats()
	require.Zero(t, s.Fallbacks)
	var copyReads uint64
	for _, n := range s.CopyReads {
		copyReads += n
	}
	require.Equal(t, uint64(getReads), copyReads)
}

func diff(before, after []float64) []float64 {
	out := make([]float64, len(after))
	for i := range after {
		out[i] = after[i] - before[i]
	}
	return out
}

func TestNonHotKeyIsOnePhysicalKey(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		c := f.client(t)
		prefix := celebritytest.NewPrefix(t)
		key := celebritytest.NewPrefix(t) + "user:7"
		r := newReplicator(t, c, replicas.Options{Prefix: prefix})
		ctx := testkit.Ctx(t)
		require.NoError(t, r.Set(ctx, key, []byte("alice"), 1, time.Minute))
		v, _, data := stored(t, c, r.PrimaryKey(key))
		require.Equal(t, uint64(1), v)
		require.Equal(t, "alice", data)
		// No other key was created: no copies, no lease, nothing outside the prefix.
		var mu sync.Mutex
		var extra []string
		scan := func(ctx context.Context, cl *redis.Client) error {
			keys, err := cl.Keys(ctx, prefix+"*").Result()
			mu.Lock()
			extra = append(extra, keys...)
			mu.Unlock()
			return err
		}
		admin := celebritytest.AdminOf(t, c) // KEYS and EXISTS are not in the package's rule
		if cc, ok := admin.(*redis.ClusterClient); ok {
			require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, cl *redis.Client) error { return scan(ctx, cl) }))
		} else {
			require.NoError(t, scan(ctx, admin.(*redis.Client)))
		}
		require.Equal(t, []string{r.PrimaryKey(key)}, extra)
		n, err := admin.Exists(ctx, key).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the logical key's own name is the host's")
		it, err := r.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, replicas.Item{Value: []byte("alice"), Version: 1}, it)
		require.Equal(t, uint64(1), r.Stats().PrimaryReads)
	})
}

func TestPromoteUnderReadLoadCausesNoLoads(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "post:hot"
		prefix := celebritytest.NewPrefix(t)
		var loads atomic.Int64
		load := func(context.Context, string) (replicas.Item, error) {
			loads.Add(1)
			return replicas.Item{Value: []byte("v"), Version: 1}, nil
		}
		instances := make([]*replicas.Replicator, 3)
		for i := range instances {
			instances[i] = newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Copies: 3})
		}
		_, err := instances[0].GetOrLoad(testkit.Ctx(t), key, time.Minute, load)
		require.NoError(t, err)
		require.Equal(t, int64(1), loads.Load())

		stop := make(chan struct{})
		var reads atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 12 {
			r := instances[i%len(instances)]
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					it, err := r.GetOrLoad(context.Background(), key, time.Minute, load)
					if err == nil && string(it.Value) != "v" {
						err = context.Canceled
					}
					if err != nil {
						errs <- err
						return
					}
					reads.Add(1)
				}
			})
		}
		require.Eventually(t, func() bool { return reads.Load() > 200 }, 30*time.Second, time.Millisecond)
		for _, r := range instances {
			require.NoError(t, r.Promote(testkit.Ctx(t), key))
		}
		mark := reads.Load()
		require.Eventually(t, func() bool { return reads.Load() > mark+500 }, 30*time.Second, time.Millisecond)
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, int64(1), loads.Load(), "no source load beyond the first")
		for i, r := range instances {
			s := r.Stats()
			if i == 0 {
				require.Equal(t, uint64(1), s.Misses, "only the very first read missed")
			} else {
				require.Zero(t, s.Misses)
			}
			require.Zero(t, s.Fallbacks, "promotion warmed the copies before reads used them")
			require.Equal(t, uint64(1), s.Promotions)
			var copyReads uint64
			for _, n := range s.CopyReads {
				copyReads += n
			}
			require.Positive(t, copyReads)
		}
	})
}

func TestChangingCopiesNeverMissesNorServesOlder(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "k"
		prefix := celebritytest.NewPrefix(t)
		three := newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Copies: 3, Hot: []string{key}})
		ctx := testkit.Ctx(t)
		require.NoError(t, three.Set(ctx, key, []byte("v1"), 1, time.Minute))

		// An instance deployed with N=6 reads copies nobody wrote yet: it falls back and
		// refills them, and never reports a miss.
		six := newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Copies: 6, Hot: []string{key}})
		for range 50 {
			it, err := six.Get(ctx, key)
			require.NoError(t, err)
			require.Equal(t, "v1", string(it.Value))
		}
		require.Zero(t, six.Stats().Misses)
		require.Positive(t, six.Stats().Repairs)

		// The N=3 writer updates the copies the N=6 reader registered.
		require.NoError(t, three.Set(ctx, key, []byte("v2"), 2, time.Minute))
		ck, err := six.CopyKeys(ctx, key)
		require.NoError(t, err)
		c := f.client(t)
		for _, k := range ck {
			v, _, data := stored(t, c, k)
			require.Equal(t, uint64(2), v, k)
			require.Equal(t, "v2", data, k)
		}
		for range 50 {
			it, err := six.Get(ctx, key)
			require.NoError(t, err)
			require.Equal(t, "v2", string(it.Value))
		}
	})
}

func TestWriterThatDoesNotKnowTheKeyIsHotStillUpdatesCopies(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "k"
		prefix := celebritytest.NewPrefix(t)
		reader := newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Copies: 3})
		writer := newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Copies: 3})
		ctx := testkit.Ctx(t)
		require.NoError(t, writer.Set(ctx, key, []byte("v1"), 1, time.Minute))
		require.NoError(t, reader.Promote(ctx, key))
		require.NoError(t, writer.Set(ctx, key, []byte("v2"), 2, time.Minute))
		for range 30 {
			it, err := reader.Get(ctx, key)
			require.NoError(t, err)
			require.Equal(t, "v2", string(it.Value))
		}
		require.NoError(t, writer.Delete(ctx, key, 3))
		for range 30 {
			_, err := reader.Get(ctx, key)
			require.ErrorIs(t, err, replicas.ErrNotFound)
		}
		// Demoted, the reader reads the logical key.
		require.NoError(t, reader.Demote(ctx, key))
		require.False(t, reader.IsHot(key))
		before := reader.Stats().PrimaryReads
		_, err := reader.Get(ctx, key)
		require.ErrorIs(t, err, replicas.ErrNotFound)
		require.Equal(t, before+1, reader.Stats().PrimaryReads)
	})
}

func TestIsHotCallbackAndAffinity(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "k"
		r := newReplicator(t, f.client(t), replicas.Options{
			Copies: 4, Affinity: true,
			IsHot: func(k string) bool { return k == key },
		})
		ctx := testkit.Ctx(t)
		require.NoError(t, r.Set(ctx, key, []byte("v"), 1, time.Minute))
		for range 40 {
			_, err := r.Get(ctx, key)
			require.NoError(t, err)
		}
		used := 0
		for _, n := range r.Stats().CopyReads {
			if n > 0 {
				used++
				require.Equal(t, uint64(40), n, "affinity pins the instance to one copy")
			}
		}
		require.Equal(t, 1, used)
	})
}

func TestHostsOwnKeysAreNeverReadNorWritten(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		c := f.client(t)
		ctx := testkit.Ctx(t)
		prefix := celebritytest.NewPrefix(t)
		plainKey := celebritytest.NewPrefix(t) + "post:7"
		hotKey := celebritytest.NewPrefix(t) + "post:8"
		// The host already keeps its own values under these names.
		for _, k := range []string{plainKey, hotKey} {
			require.NoError(t, c.Set(ctx, k, "host's own", time.Hour).Err())
		}
		r := newReplicator(t, c, replicas.Options{Prefix: prefix, Hot: []string{hotKey}})
		for _, k := range []string{plainKey, hotKey} {
			_, err := r.Get(ctx, k)
			require.ErrorIs(t, err, replicas.ErrNotFound, "%s: the host's key is not ours to read", k)
			it, err := r.GetOrLoad(ctx, k, time.Minute, func(context.Context, string) (replicas.Item, error) {
				return replicas.Item{Value: []byte("loaded"), Version: 1}, nil
			})
			require.NoError(t, err)
			require.Equal(t, "loaded", string(it.Value))
			require.NoError(t, r.Set(ctx, k, []byte("set"), 2, time.Minute))
			require.NoError(t, r.Delete(ctx, k, 3))
			raw, err := c.Get(ctx, k).Result()
			require.NoError(t, err)
			require.Equal(t, "host's own", raw, "%s: the host's key is not ours to write", k)
			ttl, err := c.PTTL(ctx, k).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, 59*time.Minute, k)
		}
	})
}
