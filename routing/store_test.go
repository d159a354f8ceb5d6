package routing_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// A router learns a new generation from its announcement alone (the poll is an hour away and
// nobody waits), with the control Redis standalone or a cluster.
func TestRouterLearnsTablesByAnnouncement(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, control redis.UniversalClient) {
		p := prefix(t)
		shard := celebritytest.Standalone(t).Client(t)
		r, err := routing.New(control, routing.Options{Prefix: p, Shards: map[string]routing.ShardClient{"a": shard, "b": shard},
			PollInterval: time.Hour})
		require.NoError(t, err)
		defer func() { require.NoError(t, r.Close()) }()
		st, err := routing.NewStore(control, routing.StoreOptions{Prefix: p})
		require.NoError(t, err)
		ctx := testkit.Ctx(t)

		t1 := routing.EvenTable(1, 8, "a", "b")
		require.NoError(t, st.Publish(ctx, t1))
		require.Eventually(t, func() bool { return r.Generation() == 1 }, 30*time.Second, 2*time.Millisecond)
		t2 := t1.Next()
		t2.SetBucket(0, "b")
		fetches := r.Stats().Fetches
		require.NoError(t, st.Publish(ctx, t2))
		require.Eventually(t, func() bool { return r.Generation() == 2 }, 30*time.Second, 2*time.Millisecond)
		require.Equal(t, fetches+1, r.Stats().Fetches, "one fetch per announcement")
		require.ErrorIs(t, st.Publish(ctx, t1), routing.ErrGenerationConflict)
		got, err := st.Load(ctx)
		require.NoError(t, err)
		require.Equal(t, t2, got)
		require.Equal(t, t2, r.Table())
	})
}

// Unit names depend on B and on a spread's width K: bucket 3 of 16 and bucket 3 of 32 hold
// different tenants. If a table could change either, a client on the older table would
// write into a unit that is still open under the same name but now holds other records.
func TestPublishRefusesChangingBucketCountOrSpreadWidth(t *testing.T) {
	ctx := testkit.Ctx(t)
	control := celebritytest.Standalone(t).Client(t)
	st, err := routing.NewStore(control, routing.StoreOptions{Prefix: prefix(t)})
	require.NoError(t, err)
	t1 := routing.EvenTable(1, 16, "a", "b")
	t1.SetSpread("wide", []string{"a", "b"})
	require.NoError(t, st.Publish(ctx, t1))

	wider := t1.Next()
	wider.Buckets = 32
	wider.Ranges = routing.EvenTable(2, 32, "a", "b").Ranges
	require.ErrorIs(t, st.Publish(ctx, wider), routing.ErrInvalidTable)
	respread := t1.Next()
	respread.SetSpread("wide", []string{"a", "b", "a"})
	require.ErrorIs(t, st.Publish(ctx, respread), routing.ErrInvalidTable)
	got, err := st.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, t1, got, "nothing was published")

	moved := t1.Next()
	moved.SetSpread("wide", []string{"b", "b"})
	moved.SetSpread("new", []string{"a", "b", "a"})
	require.NoError(t, st.Publish(ctx, moved), "moving sub-buckets and adding a spread are fine")
	require.NoError(t, st.Publish(ctx, moved), "publishing the same table again (lost reply) succeeds")
	require.ErrorIs(t, st.Publish(ctx, t1.Next()), routing.ErrGenerationConflict)
}

// The table that ends a re-split changes the width of one tenant's spread: PublishReshaped
// publishes it, guarded like PublishGuarded; it changes the width of that tenant only, and
// Publish still refuses a width change.
func TestPublishReshapedChangesTheWidthOfOneSpreadOnly(t *testing.T) {
	ctx := testkit.Ctx(t)
	control := celebritytest.Standalone(t).Client(t)
	st, err := routing.NewStore(control, routing.StoreOptions{Prefix: prefix(t)})
	require.NoError(t, err)
	t1 := routing.EvenTable(1, 16, "a", "b")
	t1.SetSpread("wide", []string{"a", "b"})
	t1.SetSpread("other", []string{"a", "b"})
	require.NoError(t, st.Publish(ctx, t1))
	guard := st.Keys().ControlTag() + ":guard"
	require.NoError(t, control.HSet(ctx, guard, "epoch", "3").Err())
	want := map[string]string{"epoch": "3"}

	both := t1.Next()
	both.SetSpread("wide", []string{"a", "b", "a", "b"})
	both.SetSpread("other", []string{"a", "b", "a"})
	require.ErrorIs(t, st.PublishReshaped(ctx, both, guard, want, "wide"), routing.ErrInvalidTable, "another tenant's width")
	require.ErrorIs(t, st.PublishReshaped(ctx, both, guard, want, ""), routing.ErrInvalid)
	require.ErrorIs(t, st.PublishReshaped(ctx, both, "elsewhere", want, "wide"), routing.ErrInvalid)
	wider := t1.Next()
	wider.SetSpread("wide", []string{"a", "b", "a", "b"})
	require.ErrorIs(t, st.Publish(ctx, wider), routing.ErrInvalidTable)
	require.ErrorIs(t, st.PublishReshaped(ctx, wider, guard, map[string]string{"epoch": "2"}, "wide"), routing.ErrFenced)
	got, err := st.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, t1, got, "nothing was published")
	require.NoError(t, st.PublishReshaped(ctx, wider, guard, want, "wide"))
	got, err = st.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, wider, got)
}
