package migrate_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// A target shard restored to an earlier snapshot (taken while the copy was running) after
// the barrier and the verification, before the flip: its import claim is back, but records
// copied after the snapshot are gone. The move must not open that target and publish a
// table under which acknowledged records are missing: it aborts, reopening the source, and
// the tenant keeps every record there.
func TestMoveTargetRestoredBeforeTheFlipAborts(t *testing.T) {
	srv := celebritytest.Shards(t, 2)
	tgt := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{"a": srv[1].Client(t), "b": tgt.Client(t)},
		routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	tenant := "restore-move"
	e.override(tenant, "a")
	m := newTModel()
	m.seed(t, e.client(), tenant, 300)

	var snap celebritytest.Snapshot
	var took, restored bool
	co := e.coordinator(migrate.Options{BatchSize: 20, OnState: func(s migrate.Status) {
		switch {
		case s.State == migrate.Copying && !took:
			took = true // the claim is on b; the copy has not started
			snap = tgt.Snapshot(t)
		case s.State == migrate.ReadyB && !restored:
			restored = true
			tgt.RestoreSnapshot(t, snap)
		}
	}})
	_, err := co.Migrate(ctx, migrate.Spec{ID: "restore", Unit: routing.TenantUnit(tenant), Target: "b"})
	require.True(t, restored)
	require.ErrorIs(t, err, migrate.ErrAborted, "the move stops")
	require.ErrorIs(t, err, migrate.ErrOwnershipChanged)
	require.ErrorContains(t, err, `target "b"`)
	require.Equal(t, "a", e.table().Overrides[tenant], "no table names the target")
	require.Equal(t, routing.StateOpen, e.own("a", routing.TenantUnit(tenant)).State, "the source is open again")
	require.NotEqual(t, routing.StateOpen, e.own("b", routing.TenantUnit(tenant)).State)
	m.check(t, e, "a", routing.TenantUnit(tenant), tenant)
}
