package celebrity_test

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestInstanceKilledMidPromotion runs the fleet's leader as a separate process
// (testdata/killed), SIGKILLs it the moment it has applied a promotion, while the other
// instances are still learning it, and checks that the hot set stays consistent: every
// survivor applies the promotion, one of them takes over the lease, the hot set in Redis has
// one member and the version the survivors apply, reads stay correct, and the new leader
// demotes the key once its reads stop, once per instance.
func TestInstanceKilledMidPromotion(t *testing.T) {
	celebritytest.Long(t)
	cl := celebritytest.SharedCluster(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key := p + "celebrity"
	src.bump(key) // "v1", version 1: what the killed instance's loader returns too

	bin := filepath.Join(t.TempDir(), "killed")
	build := exec.Command("go", "build", "-o", bin, "./testdata/killed")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	child := exec.Command(bin, strings.Join(cl.Addrs(), ","), p, key)
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	child.Stderr = &stderr
	require.NoError(t, child.Start())
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})
	lines := make(chan string, 4)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the instance exited early: %s", stderr.String())
			require.Equal(t, want, l)
		case <-time.After(60 * time.Second):
			t.Fatalf("no %q from the instance: %s", want, stderr.String())
		}
	}
	expect("leader")

	var others []*celebrity.Cache[string]
	recs := make([]*recorder, 3)
	for i := range recs {
		recs[i] = &recorder{}
		o := readerOptions()
		o.OnEvent = recs[i].add
		others = append(others, newCache(t, cl.Client(t), src, p, o))
	}
	stop := readers(t, others, key)
	defer stop()
	expect("promoted")
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	err = child.Wait()
	exited = true
	require.Error(t, err, "killed by SIGKILL")
	require.Empty(t, stderr.String(), "the killed instance never read a wrong value")

	require.Eventually(t, func() bool { return hotEverywhere(others, key, true) }, 30*time.Second, 10*time.Millisecond)
	waitLeader(t, others) // a survivor takes over the lease
	rdb := cl.Client(t)
	members, err := rdb.HGetAll(t.Context(), p+"{"+p+"hot}members").Result()
	require.NoError(t, err)
	require.Len(t, members, 1)
	require.Contains(t, members, key)
	version, err := rdb.HGet(t.Context(), p+"{"+p+"hot}meta", "version").Uint64()
	require.NoError(t, err)
	require.EqualValues(t, 1, version, "one change: the promotion")
	for i, c := range others {
		require.Equal(t, version, c.Stats().HotVersion, "instance %d", i)
		v, err := c.Get(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, "v1", v)
	}

	stop()
	require.Eventually(t, func() bool { return hotEverywhere(others, key, false) }, 30*time.Second, 10*time.Millisecond,
		"the new leader demotes the key")
	version, err = rdb.HGet(t.Context(), p+"{"+p+"hot}meta", "version").Uint64()
	require.NoError(t, err)
	require.EqualValues(t, 2, version)
	for i, r := range recs {
		promoted, _ := r.count(celebrity.EventPromoted, key)
		demoted, _ := r.count(celebrity.EventDemoted, key)
		require.Equal(t, 1, promoted, "instance %d: no flaps", i)
		require.Equal(t, 1, demoted, "instance %d", i)
	}
}
