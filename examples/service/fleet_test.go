package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildService builds this package's binary once for the test binary.
func buildService(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "service")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// proc is one process of the service, as the game day started it.
type proc struct {
	name string
	cmd  *exec.Cmd
	addr string
	cl   *client
	born time.Time
	done chan struct{} // closed when its log ended (the process exited)

	mu      sync.Mutex
	events  []hotEvent
	loop    uint64 // the cache's LoopCommands as last scraped
	scraped bool   // loop was read at least once
	warns   int
	slow    []slowRequest // requests the process itself logged as past their deadline + 50ms
}

type slowRequest struct {
	Path  string
	Start time.Time
	Took  time.Duration
}

// hotEvent is one hot-set change the process logged (Options.OnEvent).
type hotEvent struct {
	Kind string
	Key  string
	At   time.Time
	Rate float64
}

// startProc starts a service process against the cluster at addrs and waits until it serves.
func startProc(t *testing.T, bin, name string, addrs []string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{}), born: time.Now()}
	p.cmd = exec.Command(bin, "-listen", "127.0.0.1:0")
	p.cmd.Env = append(os.Environ(), "REDIS_CLUSTER_ADDRS="+strings.Join(addrs, ","))
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill(); <-p.done })
	serving := make(chan string, 1)
	go p.read(stderr, serving)
	select {
	case addr := <-serving:
		p.addr = addr
		p.cl = newClient("http://" + addr)
	case <-p.done:
		t.Fatalf("%s exited before serving", name)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not serve within 30s", name)
	}
	return p
}

func (p *proc) read(r io.Reader, serving chan<- string) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg, Addr, Kind, Key, Path string
			Rate                       float64
			AtUs                       int64 `json:"at_us"`
			StartUs                    int64 `json:"start_us"`
			TookMs                     int64 `json:"took_ms"`
			Level                      string
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch {
		case line.Msg == "serving":
			serving <- line.Addr
		case line.Msg == "hot set":
			p.mu.Lock()
			p.events = append(p.events, hotEvent{Kind: line.Kind, Key: line.Key, At: time.UnixMicro(line.AtUs), Rate: line.Rate})
			p.mu.Unlock()
		case line.Msg == "slow request":
			p.mu.Lock()
			p.slow = append(p.slow, slowRequest{Path: line.Path, Start: time.UnixMicro(line.StartUs), Took: time.Duration(line.TookMs) * time.Millisecond})
			p.mu.Unlock()
		case line.Level == "WARN" || line.Level == "ERROR":
			p.mu.Lock()
			p.warns++
			p.mu.Unlock()
		}
	}
	_ = p.cmd.Wait()
}

// kill ends the process with SIGKILL, as a crash would.
func (p *proc) kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// scrape reads the cache's loop command count from the admin handler (/admin/posts).
func (p *proc) scrape(ctx context.Context) {
	var st struct {
		Stats *struct {
			LoopCommands *uint64 `json:"loop_commands"`
		}
	}
	if r := p.cl.do(ctx, http.MethodGet, "/admin/posts", nil, &st); r.Status == http.StatusOK && st.Stats != nil && st.Stats.LoopCommands != nil {
		p.mu.Lock()
		p.loop = max(p.loop, *st.Stats.LoopCommands)
		p.scraped = true
		p.mu.Unlock()
	}
}

func (p *proc) hotEvents(key string) []hotEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []hotEvent
	for _, e := range p.events {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

func (p *proc) String() string { return fmt.Sprintf("%s(%s)", p.name, p.addr) }
