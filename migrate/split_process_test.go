package migrate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// newSplitProcEnvs returns a standalone env (control and shards a, b, c, d on five servers)
// and a cluster env (control and shard a on the shared cluster, shards b, c, d standalone),
// reachable by driver processes.
func newSplitProcEnvs(t *testing.T) map[string]*procEnv {
	bin := buildDriver(t)
	srv := celebritytest.Shards(t, 5)
	std := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": srv[2].Client(t),
		"c": srv[3].Client(t), "d": srv[4].Client(t)}, routing.ShardOptions{})
	cl := celebritytest.SharedCluster(t)
	more := celebritytest.Shards(t, 3)
	clu := newEnvOver(t, cl.Client(t), map[string]migrate.ShardClient{"a": cl.Client(t), "b": more[0].Client(t),
		"c": more[1].Client(t), "d": more[2].Client(t)}, routing.ShardOptions{})
	return map[string]*procEnv{
		"standalone": {env: std, bin: bin, args: []string{"-control", srv[0].Addr(), "-prefix", std.prefix,
			"-shards", "a=" + srv[1].Addr() + ";b=" + srv[2].Addr() + ";c=" + srv[3].Addr() + ";d=" + srv[4].Addr()}},
		"cluster": {env: clu, bin: bin, args: []string{"-control", strings.Join(cl.Addrs(), ","), "-control-cluster",
			"-prefix", clu.prefix, "-shards", "a=" + strings.Join(cl.Addrs(), ",") + "/cluster;b=" + more[0].Addr() +
				";c=" + more[1].Addr() + ";d=" + more[2].Addr()}},
	}
}

// Split driver processes are SIGKILLed (or SIGSTOPped) at every state of a split 1 -> 4, a
// re-split 4 -> 8 and a re-split 8 -> 4, and each move is finished by Resume from a new
// process, while every tenant keeps writing through clients on the table of their start.
// Each tenant makes the three moves; the stop point of its moves rotates, so that every
// kind of move meets every stop point (half of them on standalone shards, half on the
// cluster). After each move the table holds the new spread, every new
// sub-bucket is open and every old unit closed, no migration is left unfinished, a stopped
// first driver is fenced and published nothing, and at the end every tenant's spread holds
// exactly its acknowledged history.
func TestSplitDriverProcessesKilledOrStoppedAtEveryState(t *testing.T) {
	for name, pe := range newSplitProcEnvs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			rounds := []struct{ how, at, arg string }{
				{"killed", "", "prepare"},
				{"killed", string(migrate.Copying), ""},
				{"killed", string(migrate.CatchingUp), ""},
				{"killed", string(migrate.ClosedA), ""},
				{"killed", "", "l0:barrier"},
				{"killed", string(migrate.ReadyB), ""},
				{"stopped", string(migrate.CatchingUp), ""},
				{"stopped", "", routing.Keys{Prefix: pe.prefix}.Table()},
			}
			moves := [][]string{{"a", "b", "c", "d"}, {"b", "c", "d", "a", "a", "b", "c", "d"}, {"c", "d", "a", "b"}}
			// Four tenants: on standalone shards each kind of move meets the even stop
			// points, on the cluster the odd ones (to bound the test's time).
			tenants, off := make([]string, 4), 0
			if name == "cluster" {
				off = 1
			}
			m := newTModel()
			// Writers paced at 1 ms write through every move without saturating a loaded
			// server, so that a driver process reaches its stop point.
			m.pace = time.Millisecond
			seeder := pe.client()
			for i := range tenants {
				tenants[i] = fmt.Sprintf("psplit-%s-%d", name, i)
				pe.override(tenants[i], "a")
				m.seed(t, seeder, tenants[i], 60)
			}
			stop := make(chan struct{})
			var stale atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, len(tenants))
			for i, tn := range tenants {
				c := pe.client()
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- m.writer(ctx, c, tn, fmt.Sprintf("w%d", i), 15, stop, &stale)
				}()
			}
			co := pe.coordinator(migrate.Options{})
			for k, to := range moves {
				for i, tn := range tenants {
					rd := rounds[(2*i+off+k)%len(rounds)]
					old := placement(pe.table(), tn)
					id := fmt.Sprintf("%s-split-%d-%d", name, i, k)
					common := []string{"-id", id, "-split", tn, "-target", strings.Join(to, ",")}
					args := common
					if rd.at != "" {
						args = append(args, "-stop-at-state", rd.at)
					} else {
						args = append(args, "-stop-before-arg", rd.arg)
					}
					p1 := pe.start(t, args...)
					p1.waitStopped()
					if rd.how == "killed" {
						p1.signal(syscall.SIGKILL)
						p1.killed()
					}
					r2 := pe.start(t, append([]string{"-op", "resume"}, common...)...).result()
					require.Equal(t, "OwnedB", r2.State, "tenant %d move %d (%s at %s%s): %s", i, k, rd.how, rd.at, rd.arg, r2.Err)
					gen := pe.table().Generation
					if rd.how == "stopped" {
						p1.cont()
						r1 := p1.result()
						st, _ := co.Status(ctx, id)
						require.True(t, r1.Fenced, "tenant %d move %d: the first driver is fenced: %+v; journal %+v", i, k, r1, st)
						require.Equal(t, gen, pe.table().Generation, "the fenced driver published nothing")
					}
					require.Equal(t, to, pe.table().Spreads[tn], "tenant %d move %d", i, k)
					for j, s := range to {
						require.Equal(t, routing.StateOpen, pe.own(s, routing.SpreadUnit(tn, uint32(j))).State, "tenant %d move %d sub %d", i, k, j)
					}
					for _, p := range old {
						require.Equal(t, routing.StateClosed, pe.own(p.Shard, p.Unit).State, "tenant %d move %d: %s", i, k, p.Unit)
					}
					unfinished, err := co.Unfinished(ctx)
					require.NoError(t, err)
					require.Empty(t, unfinished)
				}
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Positive(t, stale.Load())
			for _, tn := range tenants {
				m.checkSpread(t, pe.env, tn)
			}
		})
	}
}
