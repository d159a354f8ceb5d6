package replicas_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestTwoWritersAtOnceNeverTakeReadersBack: two writers (one replicating the key, one not)
// set interleaved versions at once, with long and very short TTLs mixed, while hot readers
// read. No read ever returns a version older than one already acknowledged when the read
// began (a miss is allowed: the newest acknowledged value may have expired), and in the end
// every copy holds the newest version.
func TestTwoWritersAtOnceNeverTakeReadersBack(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "post:7"
		prefix := celebritytest.NewPrefix(t)
		hot := replicas.Options{Prefix: prefix, Copies: 3, Hot: []string{key}}
		writers := []*replicas.Replicator{
			newReplicator(t, f.client(t), hot),
			newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Copies: 3}),
		}
		reader := newReplicator(t, f.client(t), hot)
		ctx := testkit.Ctx(t)
		var acked atomic.Uint64 // the newest version a Set returned nil for
		var next atomic.Uint64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w, r := range writers {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					v := next.Add(1)
					ttl := time.Minute
					if (i+w)%3 == 0 {
						ttl = 30 * time.Millisecond
					}
					err := r.Set(ctx, key, []byte("x"), v, ttl)
					if errors.Is(err, replicas.ErrStaleVersion) {
						continue // the other writer got a newer version in first
					}
					if !assert.NoError(t, err) {
						return
					}
					for {
						old := acked.Load()
						if old >= v || acked.CompareAndSwap(old, v) {
							break
						}
					}
				}
			})
		}
		var reads atomic.Int64
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					floor := acked.Load()
					it, err := reader.Get(ctx, key)
					if errors.Is(err, replicas.ErrNotFound) {
						continue
					}
					if !assert.NoError(t, err) {
						return
					}
					assert.Truef(t, it.Version >= floor, "read version %d after %d was acknowledged", it.Version, floor)
					reads.Add(1)
				}
			})
		}
		require.Eventually(t, func() bool { return reads.Load() > 300 && next.Load() > 300 }, 60*time.Second, 10*time.Millisecond)
		close(stop)
		wg.Wait()
		final := next.Add(1)
		require.NoError(t, writers[1].Set(ctx, key, []byte("final"), final, time.Minute))
		require.Equal(t, map[string]int{"final": 20}, hotReads(t, reader, key, 20))
		ck, err := reader.CopyKeys(ctx, key)
		require.NoError(t, err)
		for _, k := range ck {
			v, _, _ := stored(t, f.client(t), k)
			require.Equal(t, final, v, k)
		}
	})
}
