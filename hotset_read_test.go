package celebrity_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestReadHotSetShowsWhatTheFleetPublished: ReadHotSet, with no Cache of its own, sees the
// members (manual, with their time), the recent demotions and the leader with its epoch and
// lease, on a standalone server and on a cluster.
func TestReadHotSetShowsWhatTheFleetPublished(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		ctx := t.Context()
		p := celebritytest.NewPrefix(t)
		rdb := d.client(t)

		empty, err := celebrity.ReadHotSet(ctx, rdb, p)
		require.NoError(t, err)
		require.True(t, empty.Empty(), "no fleet under %q yet: %+v", p, empty)
		require.Equal(t, p, empty.Prefix)

		src := newSource()
		src.bump(p + "a")
		src.bump(p + "b")
		o := loopOptions()
		o.InstanceID = "reader-test-1"
		// A lease of 3 intervals: 3 s, so that a leader held back by a busy machine still
		// holds it when the set is read (at 100 ms intervals a 300 ms stall lost it).
		o.Loop.ReportInterval = time.Second
		leader := newCache(t, d.client(t), src, p, o)
		require.Eventually(t, func() bool { return leader.Stats().Leader }, 30*time.Second, 10*time.Millisecond)

		before := time.Now().Add(-time.Second)
		require.NoError(t, leader.Promote(ctx, p+"a"))
		require.NoError(t, leader.Promote(ctx, p+"b"))
		require.NoError(t, leader.Demote(ctx, p+"b"))

		hs, err := celebrity.ReadHotSet(ctx, rdb, p)
		require.NoError(t, err)
		require.False(t, hs.Empty())
		require.Equal(t, uint64(3), hs.Version, "three changes")
		require.Equal(t, "reader-test-1", hs.Leader)
		require.NotZero(t, hs.Epoch)
		require.Positive(t, hs.LeaseRemaining)
		require.Len(t, hs.Members, 1)
		m := hs.Members[0]
		require.Equal(t, p+"a", m.Key)
		require.True(t, m.Manual)
		require.True(t, m.Since.After(before), "since %v", m.Since)
		require.Len(t, hs.Demoted, 1)
		require.Equal(t, p+"b", hs.Demoted[0].Key)
		require.False(t, hs.Demoted[0].Manual)
		require.True(t, hs.Demoted[0].Since.After(before), "demoted at %v", hs.Demoted[0].Since)

		after, err := celebrity.ReadHotSet(ctx, rdb, p)
		require.NoError(t, err)
		require.Equal(t, hs.Version, after.Version, "reading changes nothing")
		require.Equal(t, hs.Members, after.Members)
	})
}

// TestReadHotSetRefusesBadPrefix: a prefix a Cache would refuse is refused before any I/O.
func TestReadHotSetRefusesBadPrefix(t *testing.T) {
	rdb := celebritytest.Standalone(t).Client(t)
	for _, p := range []string{"a{b}", string([]byte{0xff}), string(make([]byte, 129))} {
		_, err := celebrity.ReadHotSet(t.Context(), rdb, p)
		require.True(t, errors.Is(err, celebrity.ErrInvalid), "prefix %q: %v", p, err)
		require.ErrorContains(t, err, "prefix")
	}
	_, err := celebrity.ReadHotSet(t.Context(), nil, "")
	require.ErrorIs(t, err, celebrity.ErrInvalid)
}
