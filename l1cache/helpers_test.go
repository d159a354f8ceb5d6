package l1cache

import (
	"context"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

func TestMain(m *testing.M) {
	// CELEBRITYTEST_ACL=l1cache runs every test as a user holding only the package's rule,
	// for a channel pattern covering the channels the tests build under Prefix.
	celebritytest.RegisterRule("l1cache", func(prefix string) []string { return ACLRule(InvalidatorOptions{Channel: prefix + "*"}) })
	// The runnable examples use the shared standalone server; the kit stops it at the end.
	os.Setenv("REDIS_ADDR", celebritytest.Standalone(celebritytest.ForMain()).Addr())
	celebritytest.Main(m)
}

// seededRand returns a deterministic, concurrency-safe Options.Rand.
func seededRand(seed uint64) func() uint64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Uint64()
	}
}

// source is a loader backed by a map, counting its calls per key.
type source struct {
	mu    sync.Mutex
	vals  map[string]string
	calls map[string]int
	total atomic.Int64
}

func newSource() *source {
	return &source{vals: map[string]string{}, calls: map[string]int{}}
}

func (s *source) set(key, v string) {
	s.mu.Lock()
	s.vals[key] = v
	s.mu.Unlock()
}

func (s *source) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key]
}

func (s *source) load(_ context.Context, key string) (string, error) {
	s.total.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[key]++
	v, ok := s.vals[key]
	if !ok {
		return "", ErrNotFound
	}
	return v, nil
}

// newCache builds a cache and closes it at the end of the test.
func newCache[V any](t testing.TB, load Loader[V], o Options[V]) *Cache[V] {
	t.Helper()
	if o.MaxEntries == 0 && o.MaxCost == 0 {
		o.MaxEntries = 100_000
	}
	c, err := New(load, o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// waitFor receives from ch or fails the test after a generous bound: 30 s, since a busy
// machine running the race detector was seen to take more than 5 s for a thousand Gets.
func waitFor[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// get calls c.Get with a background context and requires success.
func get[V any](t testing.TB, c *Cache[V], key string) V {
	t.Helper()
	v, err := c.Get(context.Background(), key)
	require.NoError(t, err)
	return v
}
