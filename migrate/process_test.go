package migrate_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// procLease is the lease the driver processes take: short, so a stopped or killed driver is
// taken over quickly.
const procLease = 600 * time.Millisecond

// procEnv is an env whose servers driver processes can reach by address.
type procEnv struct {
	*env
	bin  string
	args []string // connection flags for the driver
}

// buildDriver builds the driver command (testdata/driver) into a temporary folder.
func buildDriver(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "driver")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/driver").CombinedOutput()
	require.NoError(t, err, "build the driver: %s", out)
	return bin
}

// newProcEnvs returns a standalone env (control, shards a and b on three servers) and a
// cluster env (control and shard a on the shared cluster, shard b standalone).
func newProcEnvs(t *testing.T) map[string]*procEnv {
	bin := buildDriver(t)
	srv := celebritytest.Shards(t, 3)
	std := newEnv(t, routing.ShardOptions{})
	std.control, std.clients = srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": srv[2].Client(t)}
	std = newEnvOver(t, srv[0].Client(t), std.clients, routing.ShardOptions{})
	cl := celebritytest.SharedCluster(t)
	b := celebritytest.Standalone(t)
	clu := newEnvOver(t, cl.Client(t), map[string]migrate.ShardClient{"a": cl.Client(t), "b": b.Client(t)}, routing.ShardOptions{})
	clu.prefix += ":c"
	clu = newEnvOver(t, cl.Client(t), clu.clients, routing.ShardOptions{})
	return map[string]*procEnv{
		"standalone": {env: std, bin: bin, args: []string{"-control", srv[0].Addr(), "-prefix", std.prefix,
			"-shards", "a=" + srv[1].Addr() + ";b=" + srv[2].Addr()}},
		"cluster": {env: clu, bin: bin, args: []string{"-control", strings.Join(cl.Addrs(), ","), "-control-cluster",
			"-prefix", clu.prefix, "-shards", "a=" + strings.Join(cl.Addrs(), ",") + "/cluster;b=" + b.Addr()}},
	}
}

// proc is one driver process.
type proc struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
}

func (pe *procEnv) start(t testing.TB, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(pe.bin, append(append([]string{}, pe.args...), append([]string{"-lease", procLease.String()}, args...)...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{t: t, cmd: cmd, stdin: in, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = in.Close()
		for range p.lines {
		}
		_ = cmd.Wait()
	})
	return p
}

// waitStopped waits until the driver reached its stop point, where it waits for a line on
// its standard input, and then freezes the whole process with SIGSTOP (its lease heartbeat
// included), as a long GC pause or a SIGSTOP by an operator would. The stop is sent by the
// test, once the driver is parked, so that continuing it ([proc.cont]) cannot race a stop
// still on its way.
func (p *proc) waitStopped() {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(p.t, ok, "the driver ended before its stop point")
		require.Contains(p.t, l, `"stopped":true`)
	case <-time.After(90 * time.Second):
		p.t.Fatal("the driver never reached its stop point")
	}
	p.signal(syscall.SIGSTOP)
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(60 * time.Second)
	for !stopped(pid) {
		if time.Now().After(deadline) {
			p.t.Fatalf("the driver is not stopped 60 s after SIGSTOP: state %q", procState(pid))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cont continues a driver stopped by [proc.waitStopped] past its stop point.
func (p *proc) cont() {
	p.t.Helper()
	p.signal(syscall.SIGCONT)
	_, err := io.WriteString(p.stdin, "go\n")
	require.NoError(p.t, err)
}

// cldStopped is si_code CLD_STOPPED: the child was stopped by a signal.
const cldStopped = 5

// stopped reports whether the child pid is stopped, as the kernel reports it to the parent
// (waitid with WSTOPPED and WNOWAIT, which leaves the child waitable), or as /proc shows it.
func stopped(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err == nil && info.Signo == int32(unix.SIGCHLD) && info.Code == cldStopped {
		return true
	}
	return procState(pid) == "T"
}

func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

func (p *proc) signal(sig syscall.Signal) { require.NoError(p.t, p.cmd.Process.Signal(sig)) }

type driverResult struct {
	State     string `json:"state"`
	Err       string `json:"err"`
	Fenced    bool   `json:"fenced"`
	Cancelled bool   `json:"cancelled"`
	Aborted   bool   `json:"aborted"`
}

// result waits for the driver to exit and returns its outcome.
func (p *proc) result() driverResult {
	p.t.Helper()
	var last string
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				require.NoError(p.t, p.cmd.Wait(), "driver exit")
				var r driverResult
				require.NoError(p.t, json.Unmarshal([]byte(last), &r), "driver output %q", last)
				return r
			}
			last = l
		case <-deadline:
			p.t.Fatal("the driver did not finish")
		}
	}
}

// killed waits for a SIGKILLed driver to be gone.
func (p *proc) killed() {
	for range p.lines {
	}
	_ = p.cmd.Wait()
}

// requireOneOpenOwner checks the unit's end state once no driver is active: exactly one of
// a and b holds it open, the table assigns it there, no shard holds a claim of it, the
// unit's lock is free, and a routed write is accepted.
func (pe *procEnv) requireOneOpenOwner(t *testing.T, u routing.Unit, m *model) string {
	t.Helper()
	ctx := testkit.Ctx(t)
	var open []string
	for _, s := range []string{"a", "b"} {
		if pe.own(s, u).State == routing.StateOpen {
			open = append(open, s)
		}
	}
	require.Len(t, open, 1, "exactly one open owner: a %v, b %v", pe.own("a", u), pe.own("b", u))
	require.Equal(t, open[0], pe.table().Owner(u), "the table routes to the open owner")
	co := pe.coordinator(migrate.Options{})
	claims, err := co.Claims(ctx, u)
	require.NoError(t, err)
	require.Empty(t, claims, "no claim is left behind")
	unfinished, err := co.Unfinished(ctx)
	require.NoError(t, err)
	require.Empty(t, unfinished)
	cl := pe.client()
	op, opID := routing.Put("probe", fmt.Sprint(time.Now().UnixNano())), fmt.Sprintf("m%d-probe-%d", m.id, time.Now().UnixNano())
	res, err := cl.do(ctx, u, "course", opID, op)
	require.NoError(t, err, "the unit takes writes")
	m.ack("probe", op, opID, res)
	return open[0]
}

func other(s string) string {
	if s == "a" {
		return "b"
	}
	return "a"
}

// Two processes drive one migration; the first stops (SIGSTOP) in catch-up, the second
// takes over once the first's lease expired and finishes; the first, continued, is fenced
// at its next step. Or the first is SIGKILLed and the second resumes.
func TestTwoDriverProcessesOfOneMigrationLeaveOneOpenOwner(t *testing.T) {
	celebritytest.Long(t)
	for name, pe := range newProcEnvs(t) {
		t.Run(name, func(t *testing.T) {
			u := routing.BucketUnit(1)
			pe.openOwner(u)
			cl := pe.client()
			m := newModel()
			m.seed(t, cl, u, 300)
			for round, how := range []string{"stopped", "stopped-in-flip", "killed", "both-at-once"} {
				src := pe.table().Owner(u)
				dst := other(src)
				id := fmt.Sprintf("%s-two-%d", name, round)
				common := []string{"-id", id, "-bucket", "1", "-target", dst}
				switch how {
				case "stopped", "stopped-in-flip":
					at := migrate.CatchingUp
					if how == "stopped-in-flip" {
						at = migrate.ReadyB
					}
					p1 := pe.start(t, append(common, "-stop-at-state", string(at))...)
					p1.waitStopped()
					p2 := pe.start(t, common...)
					r2 := p2.result()
					require.Equal(t, "OwnedB", r2.State, "the second driver finishes: %s", r2.Err)
					p1.cont()
					r1 := p1.result()
					require.True(t, r1.Fenced, "the first driver is fenced: %+v", r1)
				case "killed":
					p1 := pe.start(t, append(common, "-stop-at-state", string(migrate.Copying))...)
					p1.waitStopped()
					p1.signal(syscall.SIGKILL)
					p1.killed()
					r2 := pe.start(t, append([]string{"-op", "resume"}, common...)...).result()
					require.Equal(t, "OwnedB", r2.State, r2.Err)
				case "both-at-once":
					p1, p2 := pe.start(t, common...), pe.start(t, common...)
					r1, r2 := p1.result(), p2.result()
					for _, r := range []driverResult{r1, r2} {
						require.True(t, r.Err == "" || r.Fenced, "each driver finishes or is fenced: %+v", r)
					}
				}
				require.Equal(t, dst, pe.requireOneOpenOwner(t, u, m), "round %d (%s)", round, how)
				m.check(t, pe.env, dst, u)
			}
		})
	}
}

// A driver stopped just before it claims the target (Start, then Resume) is cancelled under
// its feet; continued, it cannot claim the target for its dead migration. Then Cancel races
// a running driver at random instants: either the migration is cancelled or it finishes,
// and nothing is left behind either way.
func TestCancelRacingADriverProcessLeavesNoClaim(t *testing.T) {
	celebritytest.Long(t)
	for name, pe := range newProcEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			u := routing.BucketUnit(2)
			pe.openOwner(u)
			cl := pe.client()
			m := newModel()
			m.seed(t, cl, u, 200)
			co := pe.coordinator(migrate.Options{LeaseTTL: procLease})
			for round := 0; round < 7; round++ {
				src := pe.table().Owner(u)
				dst := other(src)
				id := fmt.Sprintf("%s-cancel-%d", name, round)
				args := []string{"-id", id, "-bucket", "2", "-target", dst}
				if round == 0 {
					args = append(args, "-stop-before-arg", "prepare")
				}
				p1 := pe.start(t, args...)
				if round == 0 {
					p1.waitStopped()
				} else {
					time.Sleep(time.Duration(round*round*15) * time.Millisecond)
				}
				var st migrate.Status
				var err error
				require.Eventually(t, func() bool {
					st, err = co.Cancel(ctx, id)
					return !errors.Is(err, migrate.ErrNotFound)
				}, 30*time.Second, 2*time.Millisecond)
				if round == 0 {
					require.NoError(t, err)
					p1.cont()
				}
				r1 := p1.result()
				switch {
				case err == nil:
					require.Equal(t, migrate.Cancelled, st.State)
					require.True(t, r1.Cancelled, "the driver reports the cancellation: %+v", r1)
					if pe.own(dst, u).State != routing.StateClosed {
						// (A closed record keeps the copy an earlier move left, until Cleanup.)
						require.Zero(t, pe.dataKeys(dst, u), "the target holds nothing")
					}
					require.Equal(t, src, pe.requireOneOpenOwner(t, u, m))
				default:
					require.ErrorIs(t, err, migrate.ErrCancelRefused)
					require.Equal(t, "OwnedB", r1.State, r1.Err)
					require.Equal(t, dst, pe.requireOneOpenOwner(t, u, m))
				}
				require.NotEqual(t, routing.StateImporting, pe.own(dst, u).State)
			}
			m.check(t, pe.env, pe.table().Owner(u), u)
		})
	}
}

// A driver stopped after opening the target and before publishing the table loses its lease;
// another driver finishes the migration and the unit is moved back. The old driver,
// continued, cannot publish a table that sends the unit to the closed target.
func TestZombieDriverProcessCannotRevertALaterMove(t *testing.T) {
	celebritytest.Long(t)
	for name, pe := range newProcEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			u := routing.BucketUnit(3)
			src := pe.openOwner(u)
			dst := other(src)
			cl := pe.client()
			m := newModel()
			m.seed(t, cl, u, 200)
			id := name + "-zombie-publish"
			p1 := pe.start(t, "-id", id, "-bucket", "3", "-target", dst,
				"-stop-before-arg", routing.Keys{Prefix: pe.prefix}.Table())
			p1.waitStopped()
			require.Equal(t, routing.StateOpen, pe.own(dst, u).State, "stopped between opening the target and publishing")
			co := pe.coordinator(migrate.Options{LeaseTTL: procLease})
			st, err := co.Resume(ctx, id)
			require.NoError(t, err)
			require.Equal(t, migrate.OwnedB, st.State)
			back, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: src})
			require.NoError(t, err)
			require.Equal(t, migrate.OwnedB, back.State)
			gen := pe.table().Generation

			p1.cont()
			r1 := p1.result()
			require.True(t, r1.Fenced, "the zombie is fenced: %+v", r1)
			require.Equal(t, gen, pe.table().Generation, "no table was published by the zombie")
			require.Equal(t, src, pe.requireOneOpenOwner(t, u, m))
			m.check(t, pe.env, src, u)
		})
	}
}

// A driver stopped just before claiming the target wakes up after its migration finished
// (taken over by another driver) and the unit moved back: it cannot claim the old target
// again nor wipe the closed copy there.
func TestZombieDriverProcessCannotReclaimTheOldTarget(t *testing.T) {
	celebritytest.Long(t)
	for name, pe := range newProcEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			u := routing.BucketUnit(4)
			src := pe.openOwner(u)
			dst := other(src)
			cl := pe.client()
			m := newModel()
			m.seed(t, cl, u, 200)
			id := name + "-zombie-claim"
			p1 := pe.start(t, "-id", id, "-bucket", "4", "-target", dst, "-stop-before-arg", "prepare")
			p1.waitStopped()
			co := pe.coordinator(migrate.Options{LeaseTTL: procLease})
			st, err := co.Resume(ctx, id)
			require.NoError(t, err)
			require.Equal(t, migrate.OwnedB, st.State)
			_, err = co.Migrate(ctx, migrate.Spec{Unit: u, Target: src})
			require.NoError(t, err)
			closed := pe.own(dst, u)
			require.Equal(t, routing.StateClosed, closed.State)
			keys := pe.dataKeys(dst, u)
			require.NotZero(t, keys)

			p1.cont()
			r1 := p1.result()
			require.True(t, r1.Fenced, "the zombie is fenced: %+v", r1)
			require.Equal(t, closed, pe.own(dst, u), "the old target's record is as the move back left it")
			require.Equal(t, keys, pe.dataKeys(dst, u), "the closed copy was not wiped")
			require.Equal(t, src, pe.requireOneOpenOwner(t, u, m))
			// Cancel of the finished migration is refused and changes nothing.
			_, err = co.Cancel(ctx, id)
			require.ErrorIs(t, err, migrate.ErrCancelRefused)
			m.check(t, pe.env, src, u)
		})
	}
}
