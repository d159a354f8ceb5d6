package hotkeys

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/stretchr/testify/require"
)

// With a stock client and the server stopped, every I/O method of Probe returns by its
// ctx's deadline plus 50ms, and a ctx cancelled without a deadline ends the call as promptly
// (go-redis alone waits its ReadTimeout and retries, about 5s).
func TestProbeReturnsByItsDeadlineWithAPausedServer(t *testing.T) {
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	p, err := NewProbe(srv.Client(t))
	require.NoError(t, err)
	calls := map[string]func(ctx context.Context) error{
		"Capabilities": func(ctx context.Context) error { _, err := p.Capabilities(ctx); return err },
		"Freq":         func(ctx context.Context) error { _, err := p.Freq(ctx, []string{"a", "b"}); return err },
		"ScanTop":      func(ctx context.Context) error { _, err := p.ScanTop(ctx, ScanOptions{Limit: 10, K: 2}); return err },
	}
	srv.Pause()
	defer srv.Resume()
	celebritytest.RequireReturnsByDeadline(t, 300*time.Millisecond, calls)
}
