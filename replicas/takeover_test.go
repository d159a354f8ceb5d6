package replicas_test

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// startHolder builds testdata/holder, starts it on f's deployment and returns once it holds
// key's fill lease and runs its load, which never returns; the returned function SIGKILLs it.
func startHolder(t *testing.T, f fleet, prefix, key string, lease time.Duration) (kill func()) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "holder")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/holder").CombinedOutput()
	require.NoError(t, err, "%s", out)
	child := exec.Command(bin, strings.Join(f.addrs, ","), f.name, prefix, key, strconv.FormatInt(lease.Milliseconds(), 10))
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	child.Stderr = &stderr
	require.NoError(t, child.Start())
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = child.Process.Signal(syscall.SIGKILL)
			_ = child.Wait()
		})
	}
	t.Cleanup(kill)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the holder exited early: %s", stderr.String())
	require.Equal(t, "loading\n", line)
	return kill
}

// countingLoad returns a loader that counts its calls and takes d, as a source query does.
func countingLoad(loads *atomic.Int64, d time.Duration) replicas.Loader {
	return func(ctx context.Context, _ string) (replicas.Item, error) {
		loads.Add(1)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return replicas.Item{}, ctx.Err()
		}
		return replicas.Item{Value: []byte("body"), Version: 1}, nil
	}
}

// getAll runs callers GetOrLoad calls of key spread over reps, all at once, and checks that
// each returns the loaded item.
func getAll(t *testing.T, reps []*replicas.Replicator, callers int, key string, load replicas.Loader) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			it, err := reps[i%len(reps)].GetOrLoad(testkit.Ctx(t), key, time.Minute, load)
			if err == nil && string(it.Value) != "body" {
				err = errWrongValue(it)
			}
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

type errWrongValue replicas.Item

func (e errWrongValue) Error() string { return "wrong value " + string(e.Value) }

// TestKilledHolderIsTakenOverOnce SIGKILLs a process holding a hot key's fill lease in the
// middle of its load while 5 instances × 10 callers wait for it: one waiter takes the lease
// over, with a lease of its own whole LeaseTTL, and the source is loaded once after the
// death, however late the waiters' calls began.
func TestKilledHolderIsTakenOverOnce(t *testing.T) {
	celebritytest.Long(t)
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		key := prefix + "post:viral"
		const lease = 500 * time.Millisecond
		kill := startHolder(t, f, prefix, key, lease)
		reps := make([]*replicas.Replicator, 5)
		for i := range reps {
			reps[i] = newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Hot: []string{key}, LeaseTTL: lease})
		}
		var loads atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			getAll(t, reps, 50, key, countingLoad(&loads, 100*time.Millisecond))
		}()
		require.Eventually(t, func() bool {
			for _, r := range reps {
				if r.Stats().LeaseWaits == 0 {
					return false
				}
			}
			return true
		}, 30*time.Second, time.Millisecond, "every instance waits for the holder")
		kill()
		<-done
		require.Equal(t, int64(1), loads.Load(), "one waiter takes over and loads; the others read its fill")
	})
}

// TestStampedeOfTwentyInstancesLoadsOnce has 20 instances, 50 callers each, miss one hot key
// at once, with the default lease (2 s) and a source that takes 100 ms: the source is loaded
// once, however long the winner's fill waits on a loaded machine, since the winner keeps its
// lease while it works. (A lease is a timeout: a holder starved of CPU for longer than the
// lease loses it, by design. With a 500 ms lease, four test binaries under the race detector
// on two cores starved one that long about once in a dozen runs.)
func TestStampedeOfTwentyInstancesLoadsOnce(t *testing.T) {
	celebritytest.Long(t)
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		key := prefix + "post:viral"
		reps := make([]*replicas.Replicator, 20)
		for i := range reps {
			reps[i] = newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Hot: []string{key}})
		}
		var loads atomic.Int64
		getAll(t, reps, 1000, key, countingLoad(&loads, 100*time.Millisecond))
		require.Equal(t, int64(1), loads.Load())
		var takeovers uint64
		for _, r := range reps {
			takeovers += r.Stats().LeaseTakeovers
		}
		require.Zero(t, takeovers)
	})
}

// TestSlowHolderKeepsItsLease has a holder whose load takes three lease lifetimes while
// other instances wait: the holder keeps its lease while it loads, so nobody takes it over
// and the source is loaded once.
func TestSlowHolderKeepsItsLease(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		key := prefix + "post:slow"
		const lease = 300 * time.Millisecond
		reps := make([]*replicas.Replicator, 5)
		for i := range reps {
			reps[i] = newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Hot: []string{key}, LeaseTTL: lease})
		}
		var loads atomic.Int64
		getAll(t, reps, 50, key, countingLoad(&loads, 3*lease))
		require.Equal(t, int64(1), loads.Load())
	})
}
