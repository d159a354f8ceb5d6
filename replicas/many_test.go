package replicas_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
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
