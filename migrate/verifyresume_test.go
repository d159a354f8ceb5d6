package migrate_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// A lost coordinator reply after the verification pass does not make the next Resume in
// the same process verify the unit from scratch (a full pass under the barrier): it
// continues the pass the stopped drive made, re-reading only what changed since.
func TestResumeContinuesVerification(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		srv := celebritytest.Shards(t, 3)
		e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{
			"a": srv[1].Client(t), "b": srv[2].Client(t),
		}, routing.ShardOptions{})
		resumeAfterLostClose(t, e, srv[0], routing.BucketUnit(3))
	})
	t.Run("cluster", func(t *testing.T) {
		srv := celebritytest.Shards(t, 2)
		e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{
			"a": srv[1].Client(t), "k": celebritytest.SharedCluster(t).Client(t),
		}, routing.ShardOptions{})
		resumeAfterLostClose(t, e, srv[0], routing.BucketUnit(3))
	})
}

func resumeAfterLostClose(t *testing.T, e *env, control *celebritytest.Server, u routing.Unit) {
	ctx := testkit.Ctx(t)
	src := e.openOwner(u)
	dst := "b"
	if _, ok := e.clients["k"]; ok {
		dst = "k"
	}
	require.NotEqual(t, src, dst)
	m := newModel()
	m.seed(t, e.client(), u, 400)
	stop := writeLoad(ctx, m, e.client(), u, 2)

	inj := faults.New()
	lossy := control.Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil); o.MaxRetries = -1 })
	co, err := migrate.New(lossy, migrate.Options{Prefix: e.prefix, BatchSize: 50, Shards: e.clients,
		OnState: func(s migrate.Status) {
			if s.State == migrate.CatchingUp && s.LogApplied == 0 {
				// The first step that names ClosedA from here is the one that closes
				// the catch-up, after the verification pass.
				inj.DropReply(faults.Match{Command: "EVALSHA", Arg: string(migrate.ClosedA)}, 1)
			}
		}})
	require.NoError(t, err)
	id := "verify-" + dst
	_, err = co.Migrate(ctx, migrate.Spec{ID: id, Unit: u, Target: dst})
	require.ErrorIs(t, err, faults.ErrReplyDropped)
	require.Equal(t, int64(1), inj.Dropped())
	st, err := co.Resume(ctx, id)
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	require.NoError(t, stop())
	s := co.Stats()
	require.Equal(t, int64(1), s.VerifyPasses, "one full verification pass for the whole move")
	require.Equal(t, int64(1), s.VerifyResumed)
	require.Equal(t, dst, e.table().Owner(u))
	m.check(t, e, dst, u)
}
