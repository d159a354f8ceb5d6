package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/routing"
)

// clearScreen is what the refreshing commands write before each frame: cursor home, clear.
const clearScreen = "\x1b[H\x1b[2J"

// screens splits what a refreshing command wrote to a terminal into the frames a person saw
// one after the other; the last is what stays on the screen.
func screens(out string) []string {
	parts := strings.Split(out, clearScreen)
	return parts[1:] // before the first clear: nothing was drawn yet
}

// TestWatchScreenReachesOneHundredPercent runs 'migrate watch' as its own process beside the
// driver and reads its output as a terminal shows it: frames drawn in place, the last one the
// finished move with its bar at 100%.
func TestWatchScreenReachesOneHundredPercent(t *testing.T) {
	f := newRoutesFixture(t)
	require.Equal(t, 0, f.run(t, "", "routes", "init", "--buckets", "2", "--yes", "a", "b").code)
	rt := f.router(t)
	for i := range 200 {
		_, err := rt.Do(t.Context(), "shop"+strconv.Itoa(i%10), "op-"+strconv.Itoa(i), routing.Put("k"+strconv.Itoa(i), "v"))
		require.NoError(t, err)
	}
	bucket := routing.BucketOf("shop0", 2)
	target := map[string]string{"a": "b", "b": "a"}[rt.Table().BucketOwner(bucket)]
	r := f.run(t, "", "migrate", "start", "--detach", "--id", "w1", "--bucket", strconv.Itoa(int(bucket)), "--target", target, "--shard", f.shardFlag)
	require.Equal(t, 0, r.code, r.stderr)

	watch := exec.CommandContext(t.Context(), binPath, append([]string{"migrate", "watch", "w1", "--interval", "20ms", "--shard", f.shardFlag}, f.controlFlags...)...)
	watch.Env = append(os.Environ(), "CELEBRITY_ADDR=", "CELEBRITY_CLUSTER=")
	var out, errb bytes.Buffer
	watch.Stdout, watch.Stderr = &out, &errb
	require.NoError(t, watch.Start())
	r = f.run(t, "", "migrate", "resume", "w1", "--batch", "10", "--shard", f.shardFlag)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, watch.Wait(), "watch ends by itself once the move is final: %s", errb.String())

	frames := screens(out.String())
	require.NotEmpty(t, frames)
	last := frames[len(frames)-1]
	require.Contains(t, last, fmt.Sprintf("migration w1: bucket %d", bucket))
	require.Contains(t, last, "-> [OwnedB]")
	require.Regexp(t, `copy:  \[#{30}\] 100%  \d+ item\(s\) copied`, last)
	require.Contains(t, last, "pause: ")
	for _, fr := range frames {
		require.True(t, strings.HasPrefix(fr, "migration w1: "), "every frame is drawn from the top of the screen: %q", fr)
	}
}

// TestTopScreenRefreshesInPlace runs top for three frames and reads its output as a terminal
// shows it: three frames, each drawn from the top, the last one complete with the hot set.
func TestTopScreenRefreshesInPlace(t *testing.T) {
	f := newRoutesFixture(t)
	r := cli(t, "", nil, "top", "--frames", "3", "--interval", "50ms", "--addr", f.shards[0].Addr(), "--cache-prefix", "nosuch:")
	require.Equal(t, 0, r.code, r.stderr)
	frames := screens(r.stdout)
	require.Len(t, frames, 3)
	for _, fr := range frames {
		require.True(t, strings.HasPrefix(fr, "celebrity top — 1 node(s), "), "%q", fr)
		require.Contains(t, fr, "skew (max/mean): 1.00")
		require.True(t, strings.HasSuffix(fr, "fleet hot set (nosuch:): none (no celebrity.Cache fleet under this prefix)\n"), "%q", fr)
	}
}
