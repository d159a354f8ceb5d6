package routing_test

import (
	"bufio"
	"github.com/redis/go-redis/v9"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serverLog records the commands standalone servers execute (Redis MONITOR), so tests can
// check what reached each server rather than what the client meant to send.
type serverLog struct {
	f     *testFleet
	mu    sync.Mutex
	lines map[string][]string
	// admins are administrators' clients of the shards, for the marker (ECHO is not in
	// the package's rule).
	admins map[string]redis.UniversalClient
}

// monitor starts MONITOR on the named standalone shards until the end of the test.
func monitor(t testing.TB, f *testFleet, names ...string) *serverLog {
	t.Helper()
	l := &serverLog{f: f, lines: map[string][]string{}, admins: map[string]redis.UniversalClient{}}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // runs after the connections below are closed
	for _, name := range names {
		l.admins[name] = f.servers[name].AdminClient(t)
		conn, err := net.DialTimeout("tcp", f.servers[name].Addr(), 5*time.Second)
		require.NoError(t, err)
		_, err = conn.Write([]byte("MONITOR\r\n"))
		require.NoError(t, err)
		rd := bufio.NewReader(conn)
		ok, err := rd.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "+OK\r\n", ok)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					return
				}
				l.mu.Lock()
				l.lines[name] = append(l.lines[name], line)
				l.mu.Unlock()
			}
		}()
		t.Cleanup(func() { _ = conn.Close() })
	}
	return l
}

// count returns how many scripts the client sent to shard name that mention the test's
// prefix and needle (commands run inside scripts are not counted).
// It first sends a marker through the server and waits for it, so every command executed
// before the call is counted.
func (l *serverLog) count(name, needle string) int {
	marker := l.f.prefix + ":marker:" + time.Now().Format(time.RFC3339Nano)
	c := l.admins[name]
	if err := c.Echo(ctxBG(), marker).Err(); err != nil {
		return -1
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		lines := append([]string(nil), l.lines[name]...)
		l.mu.Unlock()
		n, seen := 0, false
		for _, line := range lines {
			if strings.Contains(line, marker) {
				seen = true
				break
			}
			if strings.Contains(strings.ToLower(line), `"evalsha"`) && strings.Contains(line, l.f.prefix) &&
				strings.Contains(line, `"`+needle+`"`) {
				n++
			}
		}
		if seen {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
	return -1
}
