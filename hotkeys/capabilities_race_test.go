package hotkeys

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Capabilities abandoned at its deadline must not share its result with the round trip
// that goes on in the background (run with -race): a slow server answers the second
// command after the caller left.
func TestCapabilitiesLeftAfterItsDeadlineDoesNotRace(t *testing.T) {
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	inj := faults.New()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: inj.Dialer(nil)})
	t.Cleanup(func() { _ = rc.Close() })
	p, err := NewProbe(rc)
	require.NoError(t, err)
	_, err = p.Capabilities(t.Context()) // a warm connection
	require.NoError(t, err)
	inj.SetLatency(80 * time.Millisecond) // each command is sent 80ms late
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Millisecond)
	defer cancel()
	caps, err := p.Capabilities(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	time.Sleep(300 * time.Millisecond) // the abandoned round trip finishes and appends
	t.Logf("caps returned with the error: %v", caps)
}
