package celebrity_test

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTwoInstancesWithOneInstanceIDAreWarned starts two instances given the same InstanceID
// (a copied configuration): the one that is not the leader finds the other holding the
// leader lease under its ID, counts it and logs a warning; only one of them leads.
func TestTwoInstancesWithOneInstanceIDAreWarned(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	var logs [2]lockedBuffer
	var caches [2]*celebrity.Cache[string]
	for i := range caches {
		o := loopOptions()
		o.InstanceID = "copied-config"
		o.Loop.PollInterval = o.Loop.ReportInterval
		o.Logger = slog.New(slog.NewTextHandler(&logs[i], nil))
		caches[i] = newCache(t, srv.Client(t), src, p, o)
	}
	require.Eventually(t, func() bool {
		return caches[0].Stats().DuplicateInstanceIDs+caches[1].Stats().DuplicateInstanceIDs > 0
	}, 30*time.Second, 10*time.Millisecond, "an instance finds the other using its InstanceID")
	warned := 0
	for i, c := range caches {
		if c.Stats().DuplicateInstanceIDs > 0 {
			warned++
			require.Contains(t, logs[i].String(), "another live instance uses this InstanceID")
			require.False(t, c.Stats().Leader, "the instance that found its twin as leader does not lead")
		}
	}
	require.Equal(t, 1, warned)
	hs, err := celebrity.ReadHotSet(t.Context(), srv.AdminClient(t), p)
	require.NoError(t, err)
	require.Equal(t, "copied-config", hs.Leader, "ReadHotSet names the leader by its InstanceID")
}
