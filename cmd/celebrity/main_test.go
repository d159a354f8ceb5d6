package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/migrate"
)

// binPath is the celebrity binary built once for the whole test run.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "celebrity-cli-")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "celebrity")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		panic("build celebrity: " + err.Error() + "\n" + string(out))
	}
	defer os.RemoveAll(dir)
	celebritytest.Main(m)
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the built binary with args and stdin, as an operator would, and returns its exit
// code and output. The environment carries no CELEBRITY_* address unless env adds one.
func cli(t testing.TB, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binPath, args...)
	cmd.Env = append(os.Environ(), "CELEBRITY_ADDR=", "CELEBRITY_CLUSTER=")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func decodeJSON[T any](t testing.TB, s string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(s), &v), "output: %s", s)
	return v
}

func TestUsageAndUnknownCommandsExitTwo(t *testing.T) {
	r := cli(t, "", nil)
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stdout, "usage: celebrity")
	require.Contains(t, r.stdout, "show | diff | init | override | spread | publish route tables", "the help names every routes subcommand")
	r = cli(t, "", nil, "frobnicate")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, `unknown command "frobnicate"`)
	r = cli(t, "", nil, "top", "--once")
	require.Equal(t, 2, r.code, "no address given")
	require.Contains(t, r.stderr, "no Redis address")
}

func TestUnreachableAddressFailsClearly(t *testing.T) {
	r := cli(t, "", nil, "top", "--once", "--addr", "127.0.0.1:1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "cannot reach Redis at 127.0.0.1:1")
}

func itoa(n int) string { return strconv.Itoa(n) }

// statusJSON is the part of a migration's --json status the tests read; the keys are
// snake_case, as admin.Shape writes them.
type statusJSON struct {
	ID      string        `json:"id"`
	State   migrate.State `json:"state"`
	Epoch   uint64        `json:"epoch"`
	FlipGen uint64        `json:"flip_gen"`
	Pause   string        `json:"pause"`
}
