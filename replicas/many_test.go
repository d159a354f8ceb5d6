package replicas_test

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

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestGetOrLoadManyLoadsEachKeyOnceAcrossTheFleet: 5 instances × 8 goroutines ask for
// overlapping batches of 20 of 40 keys, 5 of them hot, one the source does not have; every
// key is loaded once for the whole fleet (the missing one once per NegativeTTL, a minute)
// and every caller gets every item.
func TestGetOrLoadManyLoadsEachKeyOnceAcrossTheFleet(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		keys := make([]string, 40)
		for i := range keys {
			keys[i] = fmt.Sprintf("%spost:%d", prefix, i)
		}
		missing := keys[7]
		var loads sync.Map // key -> *atomic.Int64
		reps := make([]*replicas.Replicator, 5)
		load := func(_ context.Context, ks []string) (map[string]replicas.Item, error) {
			out := map[string]replicas.Item{}
			for _, k := range ks {
				n, _ := loads.LoadOrStore(k, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				if k != missing {
					out[k] = replicas.Item{Value: []byte("body:" + k), Version: 1}
				}
			}
			time.Sleep(20 * time.Millisecond) // a source query takes a while
			return out, nil
		}
		for i := range reps {
			reps[i] = newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Hot: keys[:5], NegativeTTL: time.Minute})
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 5 * 8 {
			wg.Go(func() {
				<-start
				from := (i * 3) % len(keys)
				batch := make([]string, 20)
				for j := range batch {
					batch[j] = keys[(from+j)%len(keys)]
				}
				items, errs, err := reps[i%5].GetOrLoadMany(testkit.Ctx(t), batch, time.Minute, load)
				if err != nil {
					t.Error(err)
					return
				}
				for _, k := range batch {
					if k == missing {
						if !errorsIsNotFound(errs[k]) {
							t.Errorf("%s: %v, want ErrNotFound", k, errs[k])
						}
						continue
					}
					if string(items[k].Value) != "body:"+k || errs[k] != nil {
						t.Errorf("%s: %q, %v", k, items[k].Value, errs[k])
					}
				}
			})
		}
		close(start)
		wg.Wait()
		for _, k := range keys {
			n, ok := loads.Load(k)
			require.True(t, ok, "key %s never loaded", k)
			require.Equal(t, int64(1), n.(*atomic.Int64).Load(), "key %s", k)
		}
	})
}

func errorsIsNotFound(err error) bool { return err != nil && errors.Is(err, replicas.ErrNotFound) }

// TestGetOrLoadManyLoadsInOneCallAfterALostLeaseReply: the reply of a GetOrLoadMany's lease
// pipeline is lost after its commands took every key's lease, and go-redis sends it again:
// each command finds the marker its first attempt left, the caller's own lease. The keys are
// still loaded with one call of the BatchLoader, as when the replies arrive, not with one
// call per key, and each once.
func TestGetOrLoadManyLoadsInOneCallAfterALostLeaseReply(t *testing.T) {
	faultFleets(t, func(t *testing.T, c redis.UniversalClient, inj *faults.Injector, f fleet) {
		r := newReplicator(t, c, replicas.Options{})
		prefix := celebritytest.NewPrefix(t)
		// One hash tag: on the cluster too, the batch's commands go in one pipeline.
		keys := []string{prefix + "{posts}:1", prefix + "{posts}:2", prefix + "{posts}:3", prefix + "{posts}:4"}
		var calls atomic.Int64
		var loads sync.Map // key -> *atomic.Int64
		load := func(_ context.Context, ks []string) (map[string]replicas.Item, error) {
			calls.Add(1)
			out := map[string]replicas.Item{}
			for _, k := range ks {
				n, _ := loads.LoadOrStore(k, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				out[k] = replicas.Item{Value: []byte("body:" + k), Version: 1}
			}
			return out, nil
		}
		inj.DropReply(faults.Match{Command: "SET", Arg: "l2,"}, 1)
		items, errs, err := r.GetOrLoadMany(testkit.Ctx(t), keys, time.Minute, load)
		require.NoError(t, err)
		require.Empty(t, errs)
		require.EqualValues(t, 1, inj.Dropped(), "a lease command's reply was lost")
		for _, k := range keys {
			require.Equal(t, replicas.Item{Value: []byte("body:" + k), Version: 1}, items[k])
			n, _ := loads.Load(k)
			require.EqualValues(t, 1, n.(*atomic.Int64).Load(), "loads of %s", k)
		}
		require.EqualValues(t, 1, calls.Load(), "calls of the BatchLoader")
		require.EqualValues(t, len(keys), r.Stats().LeaseWins)
	})
}
