package replicas_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

type ctxKey struct{}

// TestCloseDoesNotWaitForALoaderIgnoringItsContext: a loader hung on something that does
// not watch its ctx keeps Close from returning only until the fetch gives up; its callers get
// ErrClosed, and its late result is dropped. The loader sees the first caller's values.
func TestCloseDoesNotWaitForALoaderIgnoringItsContext(t *testing.T) {
	s := celebritytest.Standalone(t)
	key := celebritytest.NewPrefix(t) + "k"
	prefix := celebritytest.NewPrefix(t)
	r, err := replicas.New(s.Client(t), replicas.Options{Prefix: prefix, LoadTimeout: time.Hour})
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	var sawValue atomic.Bool
	load := func(ctx context.Context, _ string) (replicas.Item, error) {
		sawValue.Store(ctx.Value(ctxKey{}) == "trace-42")
		close(started)
		<-release // ignores ctx
		return replicas.Item{Value: []byte("late"), Version: 1}, nil
	}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	done := make(chan error, 1)
	go func() {
		ctx := context.WithValue(context.Background(), ctxKey{}, "trace-42")
		_, err := r.GetOrLoad(ctx, key, 0, load)
		done <- err
	}()
	<-started
	require.True(t, sawValue.Load(), "the loader's ctx carries the caller's values")
	closed := make(chan struct{})
	go func() {
		_ = r.Close()
		close(closed)
	}()
	require.Eventually(t, func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	}, 30*time.Second, 5*time.Millisecond, "Close returns while the loader still runs")
	require.ErrorIs(t, <-done, replicas.ErrClosed)
	close(release)

	// The late result is dropped and the lease was given up: another instance loads.
	other := newReplicator(t, s.Client(t), replicas.Options{Prefix: prefix})
	it, err := other.GetOrLoad(testkit.Ctx(t), key, 0, func(context.Context, string) (replicas.Item, error) {
		return replicas.Item{Value: []byte("fresh"), Version: 2}, nil
	})
	require.NoError(t, err)
	require.Equal(t, "fresh", string(it.Value))
}
