package hotkeys_test

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/hotkeys"
)

func TestMain(m *testing.M) {
	// CELEBRITYTEST_ACL=hotkeys runs every Probe as a user holding only the package's rule
	// for the tests' keys; the tests write and read their keys (the host's traffic) as the
	// administrator.
	celebritytest.RegisterRule("hotkeys", func(prefix string) []string { return hotkeys.ACLRule(hotkeys.ScanOptions{Match: prefix + "*"}) })
	// The runnable examples use the shared cluster (REDIS_CLUSTER_ADDRS) and a server with an
	// LFU policy (REDIS_ADDR: the Probe's OBJECT FREQ needs one); the kit stops them at the end.
	os.Setenv("REDIS_CLUSTER_ADDRS", strings.Join(celebritytest.SharedCluster(celebritytest.ForMain()).Addrs(), ","))
	os.Setenv("REDIS_ADDR", celebritytest.NewServer(celebritytest.ForMain(), celebritytest.ServerOptions{
		Config: []string{"maxmemory-policy", "allkeys-lfu"},
	}).Addr())
	celebritytest.Main(m)
}

// clockStart is where the tests' clocks start.
var clockStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// lockedRand is a seeded, concurrency-safe source for Options.Rand.
type lockedRand struct {
	mu sync.Mutex
	r  interface{ Uint64() uint64 }
}

func (l *lockedRand) Uint64() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Uint64()
}
