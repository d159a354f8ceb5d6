package celebritytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// crashEnv makes this test binary act as a test that starts a server and then panics.
const crashEnv = "REDISTEST_CRASH_PIDFILE"

// crashChild is this test binary run as a child by TestServersDieWithACrashedTestBinary:
// it starts a server, records its PID and folder, and panics as a broken test would.
func crashChild(pidfile string) {
	fleet.mu.Lock()
	s, err := track(ServerOptions{})
	fleet.mu.Unlock()
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(pid)+" "+s.Dir()), 0o644); err != nil {
		panic(err)
	}
	panic("a test panics with a server running")
}

// alive reports whether pid is a live process (a zombie counts as dead).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestServersDieWithACrashedTestBinary(t *testing.T) {
	Standalone(t) // skips (or fails under CI) without redis-server, like every other test
	pidfile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+pidfile)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the child was meant to panic")
	require.Contains(t, string(out), "a test panics with a server running")

	raw, err := os.ReadFile(pidfile)
	require.NoError(t, err, "the child did not start its server: %s", out)
	parts := strings.Fields(string(raw))
	pid, err := strconv.Atoi(parts[0])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !alive(pid) }, 30*time.Second, 20*time.Millisecond,
		"redis-server %d outlived its crashed test binary", pid)

	// The crashed binary's folder is swept by the next binary that starts servers.
	dir := filepath.Dir(parts[1])
	require.DirExists(t, dir)
	sweep(filepath.Dir(dir))
	require.NoDirExists(t, dir)
}
