package migrate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// With a retry window shorter than the retention, a move copies the idempotency records
// written within the window only: a retry of a recent operation replays its result on the
// new owner, records written before the window stay behind, and the copy verifies. With
// the default window every live idempotency record moves.
func TestMoveCopiesIdempotencyRecordsOfTheRetryWindowOnly(t *testing.T) {
	for _, window := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("window=%v", window), func(t *testing.T) {
			e := newEnv(t, routing.ShardOptions{})
			ctx := testkit.Ctx(t)
			u := routing.BucketUnit(5)
			require.Equal(t, "a", e.openOwner(u))
			cl := e.client()
			m := newModel()
			m.seed(t, cl, u, 40)
			// 500 idempotency records written 2 to 20 hours ago (they expire 4 to 22 hours
			// from now, at the default 24 h retention).
			c := e.clients["a"].(redis.Cmdable)
			k := routingfmt.Keys(e.shards["a"].Keys().Tag(u))
			rec, err := c.HGet(ctx, k.Ops, routing.OpKey("course", fmt.Sprintf("m%d-seed-op-0", m.id))).Result()
			require.NoError(t, err)
			now := time.Now()
			for i := 0; i < 500; i++ {
				id := fmt.Sprintf("old-%d", i)
				at := now.Add(4*time.Hour + time.Duration(i)*18*time.Hour/500)
				require.NoError(t, c.HSet(ctx, k.Ops, id, rec).Err())
				require.NoError(t, c.ZAdd(ctx, k.OpExpiry, redis.Z{Score: float64(at.UnixMilli()), Member: id}).Err())
			}
			co := e.coordinator(migrate.Options{OpRetryWindow: window})
			st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "b"})
			require.NoError(t, err)
			m.check(t, e, "b", u)
			old := 0
			for id := range e.ops("b", u) {
				if len(id) > 4 && id[:4] == "old-" {
					old++
				}
			}
			if window == 0 {
				require.Equal(t, 500, old, "every live idempotency record moves")
				require.Equal(t, int64(40+40+500), st.Copied)
			} else {
				require.Zero(t, old, "records written before the window stay behind")
				require.Equal(t, int64(40+40), st.Copied, "records and the window's op records")
			}
			// A retry of a recent operation on the new owner replays its first result.
			res, err := cl.do(ctx, u, "course", fmt.Sprintf("m%d-seed-op-7", m.id), routing.Put("seed-7", "s7"))
			require.NoError(t, err)
			require.True(t, res.Replayed)
		})
	}
	e := newEnv(t, routing.ShardOptions{})
	for _, w := range []time.Duration{25 * time.Hour, time.Millisecond, -time.Second} {
		_, err := migrate.New(e.control, migrate.Options{Shards: e.clients, OpRetryWindow: w})
		require.ErrorIs(t, err, migrate.ErrInvalid, "window %v", w)
		require.ErrorContains(t, err, "OpRetryWindow")
	}
}
