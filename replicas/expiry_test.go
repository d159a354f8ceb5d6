package replicas_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestLateCopyWriteCannotOutliveItsRegistration: W1 sets v1 for a minute with its copy
// writes held back in flight; W2 sets v2 for 150ms; v2 expires; W1's copy writes land; W3, to
// which the key is not hot, sets v3. Hot readers must never see v1 again: the late copies
// carry the absolute end of W1's registration, the copies remember v2 as a floor for as long
// as they may live, and W3 still reaches every copy.
func TestLateCopyWriteCannotOutliveItsRegistration(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "post:7"
		prefix := celebritytest.NewPrefix(t)
		hot := replicas.Options{Prefix: prefix, Copies: 3, Hot: []string{key}}
		hold := newHoldBack()
		w1 := newReplicator(t, hooked(t, f, hold), hot)
		w2 := newReplicator(t, f.client(t), hot)
		w3 := newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Copies: 3})
		reader := newReplicator(t, f.client(t), hot)
		ctx := testkit.Ctx(t)

		hold.armed.Store(true)
		w1Done := make(chan error, 1)
		go func() { w1Done <- w1.Set(ctx, key, []byte("v1"), 1, time.Minute) }()
		<-hold.held // v1 is at the primary; its copy writes are in flight
		require.NoError(t, w2.Set(ctx, key, []byte("v2"), 2, 150*time.Millisecond))
		require.Eventually(t, func() bool {
			_, err := reader.Get(ctx, key)
			return errors.Is(err, replicas.ErrNotFound)
		}, 30*time.Second, 10*time.Millisecond, "v2 expires")
		close(hold.release)
		require.NoError(t, <-w1Done, "the late copy writes are refused quietly")
		require.Equal(t, map[string]int{"miss": 30}, hotReads(t, reader, key, 30), "v1 never comes back")

		require.NoError(t, w3.Set(ctx, key, []byte("v3"), 3, time.Minute))
		require.Equal(t, map[string]int{"v3": 30}, hotReads(t, reader, key, 30))
		ck, err := reader.CopyKeys(ctx, key)
		require.NoError(t, err)
		for _, k := range ck {
			v, _, data := stored(t, f.client(t), k)
			require.Equal(t, uint64(3), v, k)
			require.Equal(t, "v3", data, k)
		}
	})
}

// TestPartialWriteWithShorterTTLStaysReachable: Set v1 for a minute; Set v2 for 150ms whose
// copy writes fail before being sent (a *PartialWriteError); after v2 expires, a Set v3 by
// an instance to which the key is not hot still reaches every copy: the registrations v1
// made are never cut short by v2's shorter life.
func TestPartialWriteWithShorterTTLStaysReachable(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		key := celebritytest.NewPrefix(t) + "post:7"
		prefix := celebritytest.NewPrefix(t)
		hot := replicas.Options{Prefix: prefix, Copies: 3, Hot: []string{key}}
		fail := &failPipelines{}
		w := newReplicator(t, hooked(t, f, fail), hot)
		plain := newReplicator(t, f.client(t), replicas.Options{Prefix: prefix, Copies: 3})
		reader := newReplicator(t, f.client(t), hot)
		ctx := testkit.Ctx(t)

		require.NoError(t, w.Set(ctx, key, []byte("v1"), 1, time.Minute))
		fail.armed.Store(true)
		err := w.Set(ctx, key, []byte("v2"), 2, 150*time.Millisecond)
		var pw *replicas.PartialWriteError
		require.ErrorAs(t, err, &pw)
		require.Len(t, pw.Failed, 3)
		fail.armed.Store(false)
		require.Eventually(t, func() bool {
			_, err := plain.Get(ctx, key)
			return errors.Is(err, replicas.ErrNotFound)
		}, 30*time.Second, 10*time.Millisecond, "v2 expires at the primary")

		require.NoError(t, plain.Set(ctx, key, []byte("v3"), 3, time.Minute))
		require.Equal(t, map[string]int{"v3": 30}, hotReads(t, reader, key, 30))
	})
}
