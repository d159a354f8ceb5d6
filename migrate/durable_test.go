package migrate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// writeLoad runs n writers on u until the returned stop function is called; stop returns the
// first writer error.
func writeLoad(ctx context.Context, m *model, c *client, u routing.Unit, n int) (stop func() error) {
	ch := make(chan struct{})
	var g errgroup.Group
	var seq atomic.Int64
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("w%d", i)
		g.Go(func() error { return m.writer(ctx, c, u, name, 50, ch, &seq) })
	}
	return func() error { close(ch); return g.Wait() }
}

func TestMigrationUnderWritesKeepsEveryAcknowledgedWrite(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(3)
	src := e.openOwner(u)
	require.Equal(t, "a", src)
	cl := e.client()
	m := newModel()
	m.seed(t, cl, u, 3000)

	obs := e.observe(u, "a", "b")
	stop := writeLoad(ctx, m, cl, u, 4)
	co := e.coordinator(migrate.Options{BatchSize: 200})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "b"})
	require.NoError(t, err)
	// Keep writing after the flip: the writers learn the new table through ErrStaleRoute.
	more := cl.stale.Load()
	require.Eventually(t, func() bool { return cl.table().Generation == st.FlipGen }, 30e9, 1e6)
	require.NoError(t, stop())
	obs.finish(t)

	require.Equal(t, migrate.OwnedB, st.State, st.String())
	require.Equal(t, uint64(2), st.FlipGen)
	require.Equal(t, "b", e.table().Owner(u))
	require.Equal(t, routing.Ownership{Generation: 1, State: routing.StateClosed}, e.own("a", u))
	require.Equal(t, routing.Ownership{Generation: 2, State: routing.StateOpen}, e.own("b", u))
	require.Positive(t, more, "writers hit the barrier and were redirected")
	m.check(t, e, "b", u)
	require.NotEmpty(t, st.Barrier)
	require.Equal(t, st.Barrier, st.Applied)
	require.Positive(t, st.Copied)
	require.Positive(t, st.Digest.Records)
	require.Positive(t, st.Digest.Tombstones)
	require.GreaterOrEqual(t, st.Digest.Ops, int64(3000), "the seeded ops were verified")
	require.LessOrEqual(t, st.Digest.Ops, int64(len(m.ops)), "ops after the flip are not in the digest")
	s := co.Stats()
	require.Equal(t, int64(1), s.Done)
	require.Positive(t, s.RecordsCopied)
	require.Positive(t, s.LogApplied, "writes during the copy came through the change log")
	require.Positive(t, s.LastPause)
	t.Log(st.String())

	// A stale write through the old generation is refused by the closed source.
	_, err = e.shards["a"].Exec(ctx, u, 1, "course", "late-op", routing.Put("x", "y"))
	require.ErrorIs(t, err, routing.ErrStaleRoute)
}
