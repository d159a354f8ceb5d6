package migrate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// Writers as fast as the catch-up (here, before every batch the catch-up applies lands, as
// many new writes reach the source) neither keep one catch-up round going forever nor keep
// the source open for MaxCatchUpRounds rounds: once the lag stops shrinking for a few
// rounds the source is closed, the barrier applies the rest, and the target holds every
// write.
func TestCatchUpOutpacedByWritersStillCloses(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(14)
	src := e.openOwner(u)
	dst := other(src)
	m := newModel()
	cl := e.client()
	m.seed(t, cl, u, 20)

	const batch = 10
	var catching atomic.Bool
	var applies, seq atomic.Int64
	co := e.coordinator(migrate.Options{BatchSize: batch, CloseLag: 5, OnState: func(s migrate.Status) {
		catching.Store(s.State == migrate.Copying || s.State == migrate.CatchingUp)
	}})
	migrate.SetBeforeApply(co, func(ctx context.Context, _ string, _ []migrate.Item, _ func([]migrate.Item) error) {
		if !catching.Load() {
			return
		}
		applies.Add(1)
		for i := 0; i < batch; i++ {
			key := fmt.Sprintf("w-k%d", i%7)
			opID := fmt.Sprintf("m%d-w-op%d", m.id, seq.Add(1))
			op := routing.Put(key, fmt.Sprintf("v%d", seq.Load()))
			res, err := cl.do(ctx, u, "course", opID, op)
			if err != nil {
				return // the barrier closed the source: the migration goes on without it
			}
			m.ack(key, op, opID, res)
		}
	})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: dst})
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, st.State)
	// A steady lag of a few batches: some ten rounds of them, not a thousand.
	require.Less(t, applies.Load(), int64(500), "batches applied while writers kept up")
	require.Equal(t, dst, e.table().Owner(u))
	m.check(t, e, dst, u)
}
