//go:build review

// Tagged: it tests the takeover retried by its holder token, which is not on main yet.

package migrate_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// Two coordinators (separate clients, standing for two processes) resume one migration at
// the same moment while the replies of their first takeovers and journal steps are lost,
// with writers on the unit. Every holder token gets one epoch however often its takeover
// is retried, no epoch goes to two holders, the epoch counter holds exactly the epochs
// granted, at most one shard is open at every instant, and the target ends with every
// acknowledged write.
func TestReviewConcurrentResumesWithLostTakeoverReplies(t *testing.T) {
	for name, e := range reviewEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t)
			u := routing.BucketUnit(3)
			src := e.openOwner(u)
			dst := other(src)
			m := newModel()
			m.seed(t, e.client(), u, 150)

			g := newGrants()
			cos := make([]*migrate.Coordinator, 2)
			hooks := make([]*lossy, 2)
			for i := range cos {
				ctl := e.newControl()
				hooks[i] = &lossy{g: g, budget: map[string]int{"acquire": 2, "step": 1}}
				ctl.AddHook(hooks[i])
				cos[i] = e.coordinatorOver(t, ctl, migrate.Options{BatchSize: 20, LeaseTTL: 400 * time.Millisecond})
			}
			st, err := e.coordinator(migrate.Options{}).Start(ctx, migrate.Spec{Unit: u, Target: dst})
			require.NoError(t, err)

			obs := e.observe(u, src, dst)
			stop := make(chan struct{})
			var seq atomic.Int64
			wdone := make(chan error, 2)
			for i := 0; i < 2; i++ {
				go func() { wdone <- m.writer(ctx, e.client(), u, fmt.Sprintf("w%d", i), 8, stop, &seq) }()
			}
			var wg sync.WaitGroup
			res := make([]migrate.Status, 2)
			errs := make([]error, 2)
			for i, co := range cos {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res[i], errs[i] = resumeUntilDone(ctx, co, st.ID)
				}()
			}
			wg.Wait()
			close(stop)
			for i := 0; i < 2; i++ {
				require.NoError(t, <-wdone)
			}
			obs.finish(t)
			for i := range cos {
				require.NoError(t, errs[i], "resume %d", i)
				require.Equal(t, migrate.OwnedB, res[i].State)
			}
			require.Positive(t, hooks[0].lost.Load()+hooks[1].lost.Load())

			n := g.check(t)
			require.Positive(t, n)
			final, err := e.coordinator(migrate.Options{}).Status(ctx, st.ID)
			require.NoError(t, err)
			cnt, err := e.control.(redis.Cmdable).Get(ctx, e.prefixEpochKey(u)).Int()
			require.NoError(t, err)
			require.Equal(t, n, cnt, "the epoch counter holds exactly the epochs granted")
			require.Equal(t, uint64(cnt), final.Epoch, "the last driver holds the newest epoch")
			require.Equal(t, dst, e.table().Owner(u))
			m.check(t, e.env, dst, u)
		})
	}
}

// prefixEpochKey is the control key of unit u's epoch counter (see the key layout in the
// package documentation).
func (e *env) prefixEpochKey(u routing.Unit) string {
	return routing.Keys{Prefix: e.prefix}.ControlTag() + ":migrate:epoch:" + routing.Keys{Prefix: e.prefix}.Tag(u)
}

func newGrants() *grants {
	return &grants{byHolder: map[string]map[string]bool{}, byEpoch: map[string]map[string]bool{}}
}

// check requires every holder token to have been granted one epoch (a retry after a lost
// reply gets the same one) and every epoch to have gone to one holder; it returns the
// number of distinct epochs granted.
func (g *grants) check(t testing.TB) int {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for h, es := range g.byHolder {
		require.Len(t, es, 1, "holder %s was granted several epochs: %v", h, es)
	}
	for e, hs := range g.byEpoch {
		require.Len(t, hs, 1, "epoch %s was granted to several holders: %v", e, hs)
	}
	return len(g.byEpoch)
}
