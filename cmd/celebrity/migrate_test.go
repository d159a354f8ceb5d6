package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// TestMigrationDriverKilledIsFinishedByResume starts a bucket move with the CLI, SIGKILLs
// the CLI process while it copies, and finishes the move with 'celebrity migrate resume'
// from a new process: the bucket ends on the target with every record readable.
func TestMigrationDriverKilledIsFinishedByResume(t *testing.T) {
	f := newRoutesFixture(t)
	require.Equal(t, 0, f.run(t, "", "routes", "init", "--buckets", "4", "--yes", "a", "b").code)
	rt := f.router(t)
	const tenants = 40
	for i := range tenants {
		tenant := "t" + strconv.Itoa(i)
		for k := range 50 {
			_, err := rt.Do(t.Context(), tenant, fmt.Sprintf("op-%d-%d", i, k), routing.Put("k"+strconv.Itoa(k), "v"))
			require.NoError(t, err)
		}
	}
	bucket := routing.BucketOf("t0", 4)
	source := rt.Table().BucketOwner(bucket)
	target := map[string]string{"a": "b", "b": "a"}[source]
	args := append([]string{"migrate", "start", "--id", "m1", "--bucket", strconv.Itoa(int(bucket)), "--target", target,
		"--shard", f.shardFlag, "--batch", "2", "--lease", "1s"}, f.controlFlags...)

	cmd := exec.Command(binPath, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	co := f.coordinator(t)
	// The driver runs in short steps (SIGCONT, a millisecond, SIGSTOP) and the move is read
	// only while the driver is stopped, so it is killed in the state the test saw, however
	// slow the machine is to get from the read to the kill.
	for deadline := time.Now().Add(30 * time.Second); ; {
		require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
		waitStopped(t, cmd.Process.Pid)
		st, err := co.Status(t.Context(), "m1")
		if err == nil && st.State == migrate.Copying && st.Copied > 0 {
			break
		}
		require.False(t, err == nil && st.State.Terminal(), "the move ended in one step of the driver: %s", &out)
		require.True(t, time.Now().Before(deadline), "the driver never started copying: %v %s", err, &out)
		require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	st, err := co.Status(t.Context(), "m1")
	require.NoError(t, err)
	require.False(t, st.State.Terminal(), "killed mid-move: %s", st.State)

	r := cli(t, "", nil, append([]string{"migrate", "list", "--json", "--shard", f.shardFlag}, f.controlFlags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, decodeJSON[[]statusJSON](t, r.stdout), 1)

	r = cli(t, "", nil, append([]string{"migrate", "resume", "m1", "--json", "--shard", f.shardFlag, "--lease", "1s"}, f.controlFlags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	final := decodeJSON[statusJSON](t, r.stdout)
	require.Equal(t, migrate.OwnedB, final.State)
	require.Greater(t, final.Epoch, st.Epoch, "resume took over with a newer epoch")
	after, err := co.Status(t.Context(), "m1")
	require.NoError(t, err)
	require.Equal(t, after.Pause.String(), final.Pause, "the pause is printed as stored, as a duration's text")

	r = cli(t, "", nil, append([]string{"migrate", "status", "m1", "--shard", f.shardFlag}, f.controlFlags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "[OwnedB]")
	require.Contains(t, r.stdout, "100%")

	_, err = rt.Await(t.Context(), final.FlipGen)
	require.NoError(t, err)
	require.Equal(t, target, rt.Table().BucketOwner(bucket))
	for i := range tenants {
		tenant := "t" + strconv.Itoa(i)
		if routing.BucketOf(tenant, 4) != bucket {
			continue
		}
		for k := range 50 {
			_, ok, err := rt.Get(t.Context(), tenant, "k"+strconv.Itoa(k))
			require.NoError(t, err)
			require.True(t, ok, "%s/k%d survived the move", tenant, k)
		}
	}
}

func (f *routesFixture) coordinator(t *testing.T) *migrate.Coordinator {
	co, err := migrate.New(f.control.Client(t), migrate.Options{Prefix: f.prefix, Shards: map[string]migrate.ShardClient{
		"a": f.shards[0].Client(t), "b": f.shards[1].Client(t)}})
	require.NoError(t, err)
	return co
}

func TestMigrateBadInputChangesNothing(t *testing.T) {
	f := newRoutesFixture(t)
	require.Equal(t, 0, f.run(t, "", "routes", "init", "--buckets", "4", "--yes", "a", "b").code)
	for name, tc := range map[string]struct {
		code int
		args []string
		want string
	}{
		"no unit":          {2, []string{"migrate", "start", "--target", "b", "--shard", f.shardFlag}, "needs --bucket"},
		"both units":       {2, []string{"migrate", "start", "--target", "b", "--bucket", "1", "--tenant", "x", "--shard", f.shardFlag}, "not both"},
		"no shards":        {2, []string{"migrate", "status", "m9"}, "needs --shard"},
		"no ID":            {2, []string{"migrate", "resume", "--shard", f.shardFlag}, "needs a migration ID"},
		"unknown ID":       {1, []string{"migrate", "status", "nope", "--shard", f.shardFlag}, "no such migration"},
		"unknown target":   {1, []string{"migrate", "start", "--bucket", "1", "--target", "zzz", "--shard", f.shardFlag}, "zzz"},
		"carve, no tenant": {2, []string{"migrate", "start", "--carve", "--bucket", "1", "--target", "b", "--shard", f.shardFlag}, "--carve needs --tenant"},
		"carve a sub":      {2, []string{"migrate", "start", "--carve", "--tenant", "x", "--sub", "1", "--target", "b", "--shard", f.shardFlag}, "--carve needs --tenant"},
		"fold, no tenant":  {2, []string{"migrate", "start", "--fold", "--bucket", "1", "--shard", f.shardFlag}, "--fold needs --tenant"},
		"carve and fold":   {2, []string{"migrate", "start", "--carve", "--fold", "--tenant", "x", "--target", "b", "--shard", f.shardFlag}, "one of --carve, --fold, --split and --merge"},
		"split and fold":   {2, []string{"migrate", "start", "--split", "--fold", "--tenant", "x", "--target", "b,c", "--shard", f.shardFlag}, "one of --carve, --fold, --split and --merge"},
		"split, no target": {2, []string{"migrate", "start", "--split", "--tenant", "x", "--shard", f.shardFlag}, "--split needs --tenant and --target"},
		"merge and split":  {2, []string{"migrate", "start", "--merge", "--split", "--tenant", "x", "--target", "b", "--shard", f.shardFlag}, "one of --carve, --fold, --split and --merge"},
		"merge, two":       {2, []string{"migrate", "start", "--merge", "--tenant", "x", "--target", "b,c", "--shard", f.shardFlag}, "--merge needs --tenant and one --target"},
		"merge, no spread": {1, []string{"migrate", "start", "--merge", "--tenant", "x", "--target", "b", "--shard", f.shardFlag}, "neither overridden nor spread"},
		"non-UTF-8 tenant": {2, []string{"migrate", "start", "--tenant", "shop\xff", "--target", "b", "--shard", f.shardFlag}, "UTF-8"},
	} {
		t.Run(name, func(t *testing.T) {
			r := f.run(t, "", tc.args...)
			require.Equal(t, tc.code, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		})
	}
	r := f.run(t, "", "migrate", "list", "--json", "--shard", f.shardFlag)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout, "nothing was started")
}

// TestMigrationFrameRendering checks the watch frame as a person sees it, from the start of
// the copy to a finished move whose bar reaches 100%.
func TestMigrationFrameRendering(t *testing.T) {
	created := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st := migrate.Status{ID: "m1", Unit: routing.BucketUnit(7), Source: "a", Target: "b", State: migrate.Copying,
		Copied: 2500, Created: created}
	got := renderMigration(st, 10000, created.Add(5*time.Second))
	require.Equal(t, "migration m1: bucket 7 a -> b\n"+
		"state: OwnedA -> [Copying] -> CatchingUp -> ClosedA -> ReadyB -> OwnedB\n"+
		"copy:  [########----------------------]  25%  2500 item(s) copied of 10000\n"+
		"rate:  500 items/s, ETA 15s\n"+
		"log:   0 change(s) applied\n", got)

	st.State, st.Copied, st.LogApplied, st.Pause = migrate.OwnedB, 10000, 12, 4*time.Millisecond
	got = renderMigration(st, 10000, created.Add(30*time.Second))
	require.Equal(t, "migration m1: bucket 7 a -> b\n"+
		"state: OwnedA -> Copying -> CatchingUp -> ClosedA -> ReadyB -> [OwnedB]\n"+
		"copy:  [##############################] 100%  10000 item(s) copied\n"+
		"log:   12 change(s) applied\n"+
		"pause: 4ms (barrier to flip)\n", got)
}

// waitStopped waits until the process pid is stopped by a signal (state T in /proc).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		return len(fields) > 0 && (fields[0] == "T" || fields[0] == "t")
	}, 30*time.Second, time.Millisecond, "process %d did not stop", pid)
}
