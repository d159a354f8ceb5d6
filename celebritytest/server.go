package celebritytest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ServerOptions configure one redis-server process.
type ServerOptions struct {
	// AOF turns on the append-only file with appendfsync always, so that every acknowledged
	// write survives kill -9 and a restart.
	AOF bool
	// Config holds extra configuration as name/value pairs, e.g.
	// []string{"maxmemory-policy", "allkeys-lfu"}.
	Config []string

	cluster bool
}

// Server is one redis-server process on a loopback port. Its methods are safe for
// concurrent use.
type Server struct {
	opts    ServerOptions
	dir     string
	port    int
	busPort int // cluster bus port, 0 for a standalone server

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// startupTimeout bounds how long a server may take to answer PING after it was started.
const startupTimeout = 15 * time.Second

func binary() string {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	return "redis-server"
}

// startServer starts a server in a new folder under root.
func startServer(root string, opts ServerOptions) (*Server, error) {
	if _, err := exec.LookPath(binary()); err != nil {
		return nil, fmt.Errorf("celebritytest: %s not found: %w", binary(), err)
	}
	var lastErr error
	for range 3 { // a free port can be taken between probing and binding it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp(root, "redis-"+strconv.Itoa(port)+"-")
		if err != nil {
			return nil, fmt.Errorf("celebritytest: %w", err)
		}
		s := &Server{opts: opts, dir: dir, port: port}
		if opts.cluster {
			// The default bus port, port+10000, may be taken or above 65535: pick one.
			if s.busPort, err = freePort(); err != nil {
				return nil, err
			}
		}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
		_ = os.RemoveAll(dir)
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("celebritytest: no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--logfile", "redis.log",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "",
		"--appendonly", "no",
	}
	if s.opts.AOF {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	}
	if s.opts.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(s.busPort),
			"--cluster-node-timeout", "3000",
			// A paused or killed master must not take the whole test cluster down.
			"--cluster-require-full-coverage", "no",
			"--cluster-allow-reads-when-down", "yes",
		)
	}
	for i := 0; i+1 < len(s.opts.Config); i += 2 {
		a = append(a, "--"+s.opts.Config[i], s.opts.Config[i+1])
	}
	return a
}

// start launches the process and waits until it answers PING.
func (s *Server) start() error {
	cmd := exec.Command(binary(), s.args()...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("celebritytest: start %s: %w", binary(), err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if err := s.awaitPing(exited); err != nil {
		return err
	}
	if err := s.createLimited(); err != nil {
		s.Kill()
		return err
	}
	return nil
}

// awaitPing waits until the started process answers PING, and fails when it exits first
// (closing exited) or does not answer within startupTimeout (then it is killed).
func (s *Server) awaitPing(exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(startupTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("celebritytest: redis-server on port %d exited: %s", s.port, s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("celebritytest: redis-server on port %d did not answer PING within %s: %v", s.port, startupTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail returns the end of the server's log, for an error about its start.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Dir returns the server's working folder (its AOF lives in Dir()/appendonlydir).
func (s *Server) Dir() string { return s.dir }

// Client returns a client of this server, closed when the test ends. opts adjust the
// options before the client is created (for example to set a Dialer or MaxRetries). Under
// LimitedEnv the client authenticates as LimitedUser.
func (s *Server) Client(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	user, pass := limitedAuth()
	return s.client(t, append([]func(*redis.Options){func(o *redis.Options) { o.Username, o.Password = user, pass }}, opts...))
}

// AdminClient is Client as the default user, also under LimitedEnv: for what a test does
// as the server's administrator (FLUSHALL, CONFIG SET, DEBUG, reading keys it does not
// own).
func (s *Server) AdminClient(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	return s.client(t, opts)
}

func (s *Server) client(t testing.TB, opts []func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: s.Addr()}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the process with SIGKILL, as a crash would, and waits for it to exit.
// Killing a server that is not running does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
}

// Restart starts a killed server again on the same port and folder, so that it loads its
// AOF (when ServerOptions.AOF was set) and, for cluster nodes, its nodes.conf.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		t.Fatalf("celebritytest: restart %s: %v", s.Addr(), err)
	}
}

// Pause stops the process with SIGSTOP: it keeps its connections but answers nothing.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP, true) }

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
		s.paused = paused
	}
}

// Paused reports whether the process is stopped by Pause.
func (s *Server) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// Running reports whether the process is alive (paused counts as alive).
func (s *Server) Running() bool {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// stop kills the process (resuming it first if paused) and removes its folder.
func (s *Server) stop() error {
	s.Resume()
	s.Kill()
	if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
