package celebrity_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestFailedStepIsNamedAndRetryCompletes loses the reply of each step of Set in turn: the
// error names the step and bounds what the fleet may serve, and a retry with the same version
// completes the write everywhere.
func TestFailedStepIsNamedAndRetryCompletes(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		key := p + "post"
		src.bump(key)
		o := celebrity.Options[string]{Fresh: time.Hour, Stale: -1}
		inj := faults.New()
		var faulty redis.UniversalClient
		if d.cluster {
			faulty = celebritytest.SharedCluster(t).Client(t, func(co *redis.ClusterOptions) {
				co.Dialer, co.MaxRetries, co.MaxRedirects = inj.Dialer(nil), -1, -1
			})
		} else {
			faulty = celebritytest.Standalone(t).Client(t, func(ro *redis.Options) {
				ro.Dialer, ro.MaxRetries = inj.Dialer(nil), -1
			})
		}
		w := newCache(t, faulty, src, p, o)
		other := newCache(t, d.client(t), src, p, o)
		for _, c := range []*celebrity.Cache[string]{w, other} {
			v, err := c.Get(t.Context(), key)
			require.NoError(t, err)
			require.Equal(t, "v1", v)
		}
		ctx := t.Context()

		// The store step: the logical key's script ran, its reply was lost.
		v2 := src.bump(key)
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: key}, 1)
		err := w.Set(ctx, key, "v2", v2)
		var werr *celebrity.WriteError
		require.ErrorAs(t, err, &werr)
		require.ErrorIs(t, err, celebrity.ErrIncomplete)
		require.Equal(t, celebrity.StepStore, werr.Step)
		require.Equal(t, "Set", werr.Op)
		require.Positive(t, werr.MayServeOlderFor)
		require.Contains(t, err.Error(), "step store")
		require.NoError(t, w.Set(ctx, key, "v2", v2), "the retry recognises the applied write and completes it")
		waitFor(t, other, key, "v2")

		// The invalidation step: the publish ran, its reply was lost. On a cluster the
		// invalidation goes over sharded pub/sub.
		v3 := src.bump(key)
		publish := "PUBLISH"
		if d.cluster {
			publish = "SPUBLISH"
		}
		inj.DropReply(faults.Match{Command: publish}, 1)
		err = w.Set(ctx, key, "v3", v3)
		require.ErrorAs(t, err, &werr)
		require.Equal(t, celebrity.StepInvalidate, werr.Step)
		require.Equal(t, time.Hour, werr.MayServeOlderFor, "Fresh+Stale of the other instances")
		v, err := w.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, "v3", v, "the local entry was still updated")
		require.NoError(t, w.Set(ctx, key, "v3", v3))
		waitFor(t, other, key, "v3")

		// A Delete whose store step fails.
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: key}, 1)
		err = w.Delete(ctx, key, v3+1)
		require.ErrorAs(t, err, &werr)
		require.Equal(t, "Delete", werr.Op)
		require.NoError(t, w.Delete(ctx, key, v3+1))
		src.mu.Lock()
		src.rows[key] = row{version: v3 + 1}
		src.mu.Unlock()
		require.Eventually(t, func() bool {
			_, err := other.Get(ctx, key)
			return errors.Is(err, celebrity.ErrNotFound)
		}, 30*time.Second, time.Millisecond)
	})
}

// TestFailedCopiesStepIsNamedAndRetryCompletes loses the reply of one copy write of a hot
// key's Set on a cluster: the error names the copies step, the logical key and the other
// instances already have the new version, and a retry completes the copies.
func TestFailedCopiesStepIsNamedAndRetryCompletes(t *testing.T) {
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key := p + "post"
	src.bump(key)
	o := celebrity.Options[string]{Fresh: time.Hour, Stale: -1, Loop: celebrity.LoopOptions{ReportInterval: -1}}
	inj := faults.New()
	faulty := celebritytest.SharedCluster(t).Client(t, func(co *redis.ClusterOptions) {
		co.Dialer, co.MaxRetries, co.MaxRedirects = inj.Dialer(nil), -1, -1
	})
	w := newCache(t, faulty, src, p, o)
	other := newCache(t, celebritytest.SharedCluster(t).Client(t), src, p, o)
	ctx := t.Context()
	require.NoError(t, w.Promote(ctx, key))
	require.Contains(t, w.Hot(), key)
	v, err := w.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, "v1", v)
	_, err = other.Get(ctx, key)
	require.NoError(t, err)

	v2 := src.bump(key)
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "}c:" + key}, 1)
	err = w.Set(ctx, key, "v2", v2)
	var werr *celebrity.WriteError
	require.ErrorAs(t, err, &werr)
	require.ErrorIs(t, err, celebrity.ErrIncomplete)
	require.Equal(t, celebrity.StepCopies, werr.Step)
	require.Equal(t, "Set", werr.Op)
	require.Equal(t, o.Fresh+celebrity.DefaultTTL, werr.MayServeOlderFor, "TTL+Fresh+Stale: a copy may keep the old value until it expires")
	require.Contains(t, err.Error(), "step copies")
	var pw *replicas.PartialWriteError
	require.ErrorAs(t, err, &pw)
	require.NotEmpty(t, pw.Failed)
	waitFor(t, other, key, "v2") // the later steps still ran: the fleet was invalidated
	v, err = w.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, "v2", v, "the local entry was still updated")
	require.NoError(t, w.Set(ctx, key, "v2", v2), "the retry completes the copies")
}

func waitFor(t *testing.T, c *celebrity.Cache[string], key, want string) {
	t.Helper()
	require.Eventually(t, func() bool {
		v, err := c.Get(t.Context(), key)
		return err == nil && v == want
	}, 30*time.Second, time.Millisecond)
}

// TestLostStoreReplySaysTheOutcomeIsUnknown loses the reply of the logical key's write of a
// Set that ran: Redis holds the new version, so the error must not say nothing was written,
// it must bound what the fleet serves as documented, and the invalidation must still go out
// so that an instance holding the older version reads the new one without a retry. A Set of
// other content under a stored version is refused with ErrConflict, saying a retry cannot
// succeed.
func TestLostStoreReplySaysTheOutcomeIsUnknown(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		key := p + "post"
		src.bump(key)
		o := celebrity.Options[string]{Fresh: time.Hour, Stale: 500 * time.Millisecond}
		inj := faults.New()
		var faulty redis.UniversalClient
		if d.cluster {
			faulty = celebritytest.SharedCluster(t).Client(t, func(co *redis.ClusterOptions) {
				co.Dialer, co.MaxRetries, co.MaxRedirects = inj.Dialer(nil), -1, -1
			})
		} else {
			faulty = celebritytest.Standalone(t).Client(t, func(ro *redis.Options) {
				ro.Dialer, ro.MaxRetries = inj.Dialer(nil), -1
			})
		}
		w := newCache(t, faulty, src, p, o)
		other := newCache(t, d.client(t), src, p, o)
		v, err := other.Get(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, "v1", v, "other holds v1 for an hour")

		v2 := src.bump(key)
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: key}, 1)
		err = w.Set(t.Context(), key, "v2", v2)
		var werr *celebrity.WriteError
		require.ErrorAs(t, err, &werr)
		require.Equal(t, celebrity.StepStore, werr.Step)
		require.Equal(t, time.Hour+time.Hour+500*time.Millisecond, werr.MayServeOlderFor, "TTL+Fresh+Stale")
		require.NotContains(t, err.Error(), "nothing was written")
		require.Contains(t, err.Error(), "outcome unknown")
		fresh := newCache(t, d.client(t), src, p, o)
		v, err = fresh.Get(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, "v2", v, "the write ran: Redis holds v2")
		waitFor(t, other, key, "v2") // the invalidation went out: no retry needed

		err = w.Set(t.Context(), key, "other content", v2)
		require.ErrorIs(t, err, celebrity.ErrConflict)
		require.NotErrorIs(t, err, celebrity.ErrIncomplete)
		require.Contains(t, err.Error(), "can never succeed")
		v, err = fresh.Get(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, "v2", v)
	})
}
