package celebrity_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

func TestOneSourceLoadForTheFleet(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		key := p + "post:1"
		src.write(key, "v1")
		var caches []*celebrity.Cache[string]
		for range 5 {
			// Fresh for an hour: the last Get is an L1 hit however slow the machine is.
			caches = append(caches, newCache(t, d.client(t), src, p, celebrity.Options[string]{Fresh: time.Hour}))
		}
		var wg sync.WaitGroup
		for _, c := range caches {
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v, err := c.Get(t.Context(), key)
					if err == nil && v != "v1" {
						err = fmt.Errorf("got %q", v)
					}
					if err != nil {
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
		require.EqualValues(t, 1, src.loadsOf(key), "one source load for 5 instances x 4 readers")
		v, err := caches[0].Get(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, "v1", v)
		require.EqualValues(t, 1, caches[0].Stats().L1.Hits)
	})
}

func TestNotFoundIsOneValueAndCached(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	c := newCache(t, srv.Client(t), src, p, celebrity.Options[string]{NegativeTTL: time.Hour})
	key := p + "missing"
	for range 3 {
		_, err := c.Get(t.Context(), key)
		require.ErrorIs(t, err, celebrity.ErrNotFound)
		require.ErrorIs(t, err, l1cache.ErrNotFound)
		require.ErrorIs(t, err, replicas.ErrNotFound)
	}
	require.EqualValues(t, 1, src.loadsOf(key), "absence is cached as a negative entry, not an error")
	require.EqualValues(t, 2, c.Stats().L1.NegativeHits)
}

// failCodec refuses to encode "bad" and to decode anything starting with "x".
type failCodec struct{}

func (failCodec) Encode(v string) ([]byte, error) {
	if v == "bad" {
		return nil, errors.New("cannot encode bad")
	}
	return []byte(v), nil
}

func (failCodec) Decode(b []byte) (string, error) {
	if len(b) > 0 && b[0] == 'x' {
		return "", errors.New("cannot decode x")
	}
	return string(b), nil
}

func TestBadInputIsRefusedClearly(t *testing.T) {
	srv := celebritytest.Standalone(t)
	rdb := srv.Client(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	c := newCache(t, rdb, src, p, celebrity.Options[string]{Codec: failCodec{}})
	ctx := t.Context()

	_, err := c.Get(ctx, "")
	require.ErrorIs(t, err, celebrity.ErrInvalid)
	require.ErrorContains(t, err, "key must not be empty")
	require.ErrorIs(t, c.Set(ctx, "", "v", 1), celebrity.ErrInvalid)
	require.ErrorIs(t, c.Delete(ctx, "", 1), celebrity.ErrInvalid)
	require.ErrorIs(t, c.Promote(ctx, ""), celebrity.ErrInvalid)
	_, err = c.Get(ctx, string(make([]byte, celebrity.MaxKeyLen+1)))
	require.ErrorIs(t, err, celebrity.ErrInvalid)

	key := p + "k"
	err = c.Set(ctx, key, "v", 0)
	require.ErrorIs(t, err, celebrity.ErrInvalid)
	require.ErrorContains(t, err, "version must be at least 1")
	require.ErrorIs(t, c.Delete(ctx, key, 0), celebrity.ErrInvalid)
	err = c.Set(ctx, key, "bad", 3)
	require.ErrorIs(t, err, celebrity.ErrCodec)
	n, err := celebritytest.AdminOf(t, rdb).Exists(ctx, key).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a value that does not encode writes nothing")

	// A stored value the codec cannot read.
	require.NoError(t, c.Set(ctx, p+"x", "xyz", 1))
	other := newCache(t, rdb, src, p, celebrity.Options[string]{Codec: failCodec{}})
	_, err = other.Get(ctx, p+"x")
	require.ErrorIs(t, err, celebrity.ErrCodec)

	// The loader's version 0 and the loader's panic.
	zero, err := celebrity.New(rdb, func(context.Context, string) (celebrity.Versioned[string], error) {
		return celebrity.Versioned[string]{Value: "v", Version: 0}, nil
	}, celebrity.Options[string]{Prefix: p, Loop: celebrity.LoopOptions{ReportInterval: -1}})
	require.NoError(t, err)
	defer zero.Close()
	_, err = zero.Get(ctx, p+"zero")
	require.ErrorIs(t, err, celebrity.ErrInvalid)
	require.ErrorContains(t, err, "version 0")

	calls := 0
	panicky, err := celebrity.New(rdb, func(context.Context, string) (celebrity.Versioned[string], error) {
		calls++
		if calls == 1 {
			panic("boom")
		}
		return celebrity.Versioned[string]{Value: "v1", Version: 1}, nil
	}, celebrity.Options[string]{Prefix: p, Loop: celebrity.LoopOptions{ReportInterval: -1}})
	require.NoError(t, err)
	defer panicky.Close()
	_, err = panicky.Get(ctx, p+"panic")
	require.ErrorIs(t, err, celebrity.ErrLoaderPanic)
	var pe *celebrity.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "boom", pe.Value)
	require.Eventually(t, func() bool { // the key is not stuck: after ErrorTTL it loads again
		v, err := panicky.Get(ctx, p+"panic")
		return err == nil && v == "v1"
	}, 30*time.Second, 20*time.Millisecond)

	for _, o := range []celebrity.Options[string]{
		{Prefix: "a{b"}, {Copies: 99}, {Loop: celebrity.LoopOptions{PromoteRate: 10, DemoteRate: 20}},
		{Loop: celebrity.LoopOptions{ReportInterval: time.Microsecond}}, {InstanceID: "has space"}, {Fresh: -1},
		{Loop: celebrity.LoopOptions{PromoteShare: 1.5}}, {Loop: celebrity.LoopOptions{PromoteShare: -0.1}},
		{Loop: celebrity.LoopOptions{PromoteRate: 100, DemoteRate: 10, ShareMinRate: 5}},
		{Loop: celebrity.LoopOptions{PromoteRate: 100, ShareMinRate: 200}},
	} {
		_, err := celebrity.New(rdb, src.load, o)
		require.ErrorIs(t, err, celebrity.ErrInvalid, "%+v", o)
	}
	_, err = celebrity.New[string](rdb, nil, celebrity.Options[string]{})
	require.ErrorIs(t, err, celebrity.ErrInvalid)
}

func TestDefaultCodecs(t *testing.T) {
	srv := celebritytest.Standalone(t)
	rdb := srv.Client(t)
	p := celebritytest.NewPrefix(t)
	type post struct {
		Title string
		Likes int
	}
	pc, err := celebrity.New(rdb, func(context.Context, string) (celebrity.Versioned[post], error) {
		return celebrity.Versioned[post]{Value: post{"hi", 3}, Version: 7}, nil
	}, celebrity.Options[post]{Prefix: p, Loop: celebrity.LoopOptions{ReportInterval: -1}})
	require.NoError(t, err)
	defer pc.Close()
	got, err := pc.Get(t.Context(), p+"post")
	require.NoError(t, err)
	require.Equal(t, post{"hi", 3}, got)
	require.Contains(t, storedUnder(t, rdb, p, "post"), `{"Title":"hi","Likes":3}`, "JSON is the default codec")

	bc, err := celebrity.New(rdb, func(context.Context, string) (celebrity.Versioned[[]byte], error) {
		return celebrity.Versioned[[]byte]{Value: []byte{0, 255, 1}, Version: 1}, nil
	}, celebrity.Options[[]byte]{Prefix: p, Loop: celebrity.LoopOptions{ReportInterval: -1}})
	require.NoError(t, err)
	defer bc.Close()
	b, err := bc.Get(t.Context(), p+"bytes")
	require.NoError(t, err)
	require.Equal(t, []byte{0, 255, 1}, b, "[]byte passes through")
}

// storedUnder returns what the cache stored in Redis for key: the one physical key under the
// test's prefix whose name ends in the key (the layout puts every physical key under the prefix).
func storedUnder(t *testing.T, rdb redis.UniversalClient, prefix, key string) string {
	t.Helper()
	rdb = celebritytest.AdminOf(t, rdb) // the test's own look at the layout
	var found []string
	iter := rdb.Scan(t.Context(), 0, prefix+"*"+key, 100).Iterator()
	for iter.Next(t.Context()) {
		found = append(found, iter.Val())
	}
	require.NoError(t, iter.Err())
	require.Len(t, found, 1, "one physical key for %q under %q: %q", key, prefix, found)
	raw, err := rdb.Get(t.Context(), found[0]).Result()
	require.NoError(t, err)
	return raw
}

// TestWriteReachesEveryInstance writes through random instances while every instance reads;
// with Fresh an hour long, only the safe write order (Redis, then fleet invalidation) can
// bring the new version to the others. No instance ever goes back to an older version.
func TestWriteReachesEveryInstance(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		key := p + "user:42"
		src.write(key, "v1")
		var caches []*celebrity.Cache[string]
		for range 4 {
			c := newCache(t, d.client(t), src, p, celebrity.Options[string]{Fresh: time.Hour, Stale: -1})
			caches = append(caches, c)
		}
		ctx := t.Context()
		for _, c := range caches {
			v, err := c.Get(ctx, key)
			require.NoError(t, err)
			require.Equal(t, "v1", v)
		}
		if d.cluster {
			require.NoError(t, caches[0].Promote(ctx, key)) // copies too
		}
		seen := make([]uint64, len(caches))
		for round := range 15 {
			version := src.bump(key)
			val := fmt.Sprintf("v%d", version)
			w := caches[rand.IntN(len(caches))]
			require.NoError(t, w.Set(ctx, key, val, version), "round %d", round)
			for i, c := range caches {
				require.Eventually(t, func() bool {
					v, err := c.Get(ctx, key)
					if err != nil {
						return false
					}
					got := versionOf(t, v)
					if got < seen[i] {
						t.Errorf("instance %d went back from v%d to v%d", i, seen[i], got)
					}
					seen[i] = got
					return got >= version
				}, 30*time.Second, time.Millisecond, "instance %d never saw v%d", i, version)
			}
		}
		// A retry of the last write, and an older write, change nothing.
		last := seen[0]
		require.NoError(t, caches[1].Set(ctx, key, fmt.Sprintf("v%d", last), last))
		require.ErrorIs(t, caches[2].Set(ctx, key, "v1", 1), celebrity.ErrStaleVersion)
		v, err := caches[3].Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("v%d", last), v)
	})
}

func TestDeleteReachesEveryInstance(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		key := p + "post:gone"
		src.write(key, "v1")
		a := newCache(t, d.client(t), src, p, celebrity.Options[string]{Fresh: time.Hour, Stale: -1, NegativeTTL: time.Hour})
		b := newCache(t, d.client(t), src, p, celebrity.Options[string]{Fresh: time.Hour, Stale: -1, NegativeTTL: time.Hour})
		for _, c := range []*celebrity.Cache[string]{a, b} {
			v, err := c.Get(t.Context(), key)
			require.NoError(t, err)
			require.Equal(t, "v1", v)
		}
		src.mu.Lock()
		src.rows[key] = row{version: 2} // deleted at version 2
		src.mu.Unlock()
		require.NoError(t, a.Delete(t.Context(), key, 2))
		require.Eventually(t, func() bool {
			_, err := b.Get(t.Context(), key)
			return errors.Is(err, celebrity.ErrNotFound)
		}, 30*time.Second, time.Millisecond)
		_, err := a.Get(t.Context(), key)
		require.ErrorIs(t, err, celebrity.ErrNotFound)
		require.ErrorIs(t, a.Set(t.Context(), key, "v1", 1), celebrity.ErrStaleVersion, "a late Set cannot resurrect")
	})
}

func TestClosedCacheServesWhatItHolds(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	src.bump(p + "a")
	c := newCache(t, srv.Client(t), src, p, celebrity.Options[string]{Fresh: time.Hour})
	_, err := c.Get(t.Context(), p+"a")
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "idempotent")
	v, err := c.Get(t.Context(), p+"a")
	require.NoError(t, err)
	require.Equal(t, "v1", v)
	_, err = c.Get(t.Context(), p+"b")
	require.ErrorIs(t, err, celebrity.ErrClosed)
	require.ErrorIs(t, c.Set(t.Context(), p+"a", "v2", 2), celebrity.ErrClosed)
	require.ErrorIs(t, c.Promote(t.Context(), p+"a"), celebrity.ErrClosed)
}

func TestReportMinRateOutOfRange(t *testing.T) {
	srv := celebritytest.Standalone(t)
	for _, r := range []float64{-1, 200} {
		_, err := celebrity.New(srv.Client(t), newSource().load, celebrity.Options[string]{
			Loop: celebrity.LoopOptions{PromoteRate: 200, ReportMinRate: r}})
		require.ErrorIs(t, err, celebrity.ErrInvalid)
		require.ErrorContains(t, err, "ReportMinRate")
	}
}

func TestEarlyReportRateAndHotReportEveryOutOfRange(t *testing.T) {
	srv := celebritytest.Standalone(t)
	for _, o := range []celebrity.Options[string]{
		{Loop: celebrity.LoopOptions{PromoteRate: 200, ReportMinRate: 5, EarlyReportRate: 4}},
		{Loop: celebrity.LoopOptions{PromoteRate: 200, EarlyReportRate: 201}},
		{Loop: celebrity.LoopOptions{PromoteRate: 200, EarlyReportRate: -1}},
	} {
		_, err := celebrity.New(srv.Client(t), newSource().load, o)
		require.ErrorIs(t, err, celebrity.ErrInvalid)
		require.ErrorContains(t, err, "EarlyReportRate")
	}
	for _, n := range []int{-1, 61} {
		_, err := celebrity.New(srv.Client(t), newSource().load, celebrity.Options[string]{
			Loop: celebrity.LoopOptions{HotReportEvery: n}})
		require.ErrorIs(t, err, celebrity.ErrInvalid)
		require.ErrorContains(t, err, "HotReportEvery")
	}
	c, err := celebrity.New(srv.Client(t), newSource().load, celebrity.Options[string]{
		Loop: celebrity.LoopOptions{
			PromoteRate: 200, ReportMinRate: 5, EarlyReportRate: 5, HotReportEvery: 4,
		}})
	require.NoError(t, err, "the bounds themselves are accepted")
	require.NoError(t, c.Close())
}
