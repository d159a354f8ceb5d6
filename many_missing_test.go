package celebrity_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// loadLog is a BatchLoader's source that has every key but missing: it counts the loads of
// each key and records when each load of missing ran.
type loadLog struct {
	missing string
	mu      sync.Mutex
	loads   map[string]int
	spans   [][2]time.Time // start, end of each load of missing
}

func (l *loadLog) load(_ context.Context, keys []string) (map[string]celebrity.Versioned[string], error) {
	start := time.Now()
	time.Sleep(5 * time.Millisecond) // a source query takes a while
	out := map[string]celebrity.Versioned[string]{}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		l.loads[k]++
		if k == l.missing {
			l.spans = append(l.spans, [2]time.Time{start, time.Now()})
			continue
		}
		out[k] = celebrity.Versioned[string]{Value: "body:" + k, Version: 1}
	}
	return out, nil
}

// TestGetManyLoadsAMissingKeyOncePerAbsentRecord: two Caches, eight goroutines each, call
// GetMany over and over for about three seconds with batches that hold a key the source does
// not have and keys it has. The missing key is answered by the fleet's absent record in
// Redis, which lives NegativeTTL (default Fresh, 1s) from the release of the load that found
// it missing: a later load starts only after it ended, never two within one record. Every
// present key is loaded once.
func TestGetManyLoadsAMissingKeyOncePerAbsentRecord(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("%spost:%d", p, i)
	}
	present := append(append([]string(nil), keys[:7]...), keys[8:]...)
	src := &loadLog{missing: keys[7], loads: map[string]int{}}
	o := celebrity.Options[string]{BatchLoader: src.load}
	caches := []*celebrity.Cache[string]{newCache(t, srv.Client(t), newSource(), p, o), newCache(t, srv.Client(t), newSource(), p, o)}
	end := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for round := 0; time.Now().Before(end); round++ {
				batch := []string{keys[7]}
				for j := range 4 {
					batch = append(batch, present[(i+round+3*j)%len(present)])
				}
				got, err := caches[i%2].GetMany(t.Context(), batch)
				if err != nil {
					t.Error(err)
					return
				}
				if v, ok := got[keys[7]]; ok {
					t.Errorf("%s: got %q for a key the source does not have", keys[7], v)
				}
				for _, k := range batch[1:] {
					if got[k] != "body:"+k {
						t.Errorf("%s: got %q", k, got[k])
					}
				}
			}
		})
	}
	wg.Wait()
	src.mu.Lock()
	defer src.mu.Unlock()
	for _, k := range keys {
		if k != keys[7] {
			require.Equal(t, 1, src.loads[k], "loads of %s", k)
		}
	}
	require.NotEmpty(t, src.spans)
	for i := 1; i < len(src.spans); i++ {
		gap := src.spans[i][0].Sub(src.spans[i-1][1])
		// 20ms: the server's clock and this process's read the same machine's time.
		require.GreaterOrEqual(t, gap, celebrity.DefaultFresh-20*time.Millisecond,
			"load %d of the missing key started %v after load %d ended, within its absent record", i+1, gap, i)
	}
	t.Logf("%d loads of the missing key in 3s", len(src.spans))
}

// TestNegativeTTLIsTheFleets: a key the source does not have is asked for once per
// Options.NegativeTTL across the fleet, not only per instance. The first instance's load
// leaves the fleet's absent record in Redis for NegativeTTL (3s here; it lived the
// Replicator's default, 1s, whatever NegativeTTL said), and another instance is answered by
// it without loading.
func TestNegativeTTLIsTheFleets(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p, src := celebritytest.NewPrefix(t), newSource()
	o := celebrity.Options[string]{NegativeTTL: 3 * time.Second}
	a, b := newCache(t, srv.Client(t), src, p, o), newCache(t, srv.Client(t), src, p, o)
	_, err := a.Get(t.Context(), p+"post:404")
	require.ErrorIs(t, err, celebrity.ErrNotFound)
	admin := srv.AdminClient(t) // KEYS is not in the Cache's ACL rule
	records, err := admin.Keys(t.Context(), p+"r:*k:"+p+"post:404").Result()
	require.NoError(t, err)
	require.Len(t, records, 1, "the key's primary record in the replicas layout")
	life, err := admin.PTTL(t.Context(), records[0]).Result()
	require.NoError(t, err)
	require.Greater(t, life, 2*time.Second, "the absent record lives NegativeTTL, not replicas.DefaultNegativeTTL")
	_, err = b.Get(t.Context(), p+"post:404")
	require.ErrorIs(t, err, celebrity.ErrNotFound)
	require.Equal(t, int64(1), src.loadsOf(p+"post:404"), "the second instance loaded again")
}
