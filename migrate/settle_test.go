package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// countHook counts the commands of one name a client sends.
type countHook struct {
	name string
	n    atomic.Int64
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), h.name) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestExpiredOneSidedItemsSettleBeforeTheBarrierInBatches: idempotency records and
// tombstones that one side only holds and that expired there are dropped from the dirty set
// by refine (before the barrier), reading their expiries in one ZMSCORE per side and
// expiry set however many there are; items that still differ stay dirty and fail finish.
func TestExpiredOneSidedItemsSettleBeforeTheBarrierInBatches(t *testing.T) {
	srv := celebritytest.Shards(t, 2)
	ca, cb := srv[0].Client(t), srv[1].Client(t)
	za, zb := &countHook{name: "zmscore"}, &countHook{name: "zmscore"}
	ca.AddHook(za)
	cb.AddHook(zb)
	ctx := testkit.Ctx(t)
	p := strings.TrimSuffix(celebritytest.NewPrefix(t), ":")
	u := routing.BucketUnit(5)
	k := routingfmt.Keys(routing.Keys{Prefix: p}.Tag(u))
	clock := time.Now()
	c, err := New(ca, Options{Shards: map[string]ShardClient{"a": ca, "b": cb}, Prefix: p, BatchSize: 1000,
		Clock: func() time.Time { return clock }})
	require.NoError(t, err)
	r := &run{Status: Status{ID: "m1", Unit: u, Source: "a", Target: "b", Applied: "0-0"}}
	v := &verifier{id: r.ID, pos: "0-0", a: newSide(), b: newSide(), dirty: map[string]bool{}}

	past, future := clock.Add(-time.Minute).UnixMilli(), clock.Add(time.Minute).UnixMilli()
	hold := func(cl *redis.Client, kind, field, val string, exp int64) {
		hash, zset := k.Records, k.Tombstones
		if kind == "o" {
			hash, zset = k.Ops, k.OpExpiry
		}
		require.NoError(t, cl.HSet(ctx, hash, field, val).Err())
		if exp > 0 {
			require.NoError(t, cl.ZAdd(ctx, zset, redis.Z{Score: float64(exp), Member: field}).Err())
		}
		v.dirty[kind+field] = true
	}
	tomb := routingfmt.EncodeRecord(routing.Record{Version: 2, Deleted: true})
	const expired = 300
	for i := range expired {
		hold(cb, "o", fmt.Sprintf("old-op-%d", i), "fp:applied:1:f", past) // purged on the source
	}
	hold(cb, "r", "gone", tomb, past)                   // a purged tombstone
	hold(ca, "o", "stale-op", "fp:applied:1:g", past)   // expired, not copied
	hold(cb, "o", "young-op", "fp:applied:1:h", future) // must be on both sides
	hold(cb, "r", "young-tomb", tomb, future)           // must be on both sides
	hold(cb, "r", "live", routingfmt.EncodeRecord(routing.Record{Version: 1, Value: "x"}), 0)
	hold(ca, "r", "both", routingfmt.EncodeRecord(routing.Record{Version: 3, Value: "a"}), 0)
	hold(cb, "r", "both", routingfmt.EncodeRecord(routing.Record{Version: 3, Value: "b"}), 0)

	require.NoError(t, c.refine(ctx, r, v))
	require.Equal(t, []string{"oyoung-op", "rboth", "rlive", "ryoung-tomb"}, slices.Sorted(func(yield func(string) bool) {
		for key := range v.dirty {
			if !yield(key) {
				return
			}
		}
	}), "only the items that still differ stay dirty for the barrier")
	require.Equal(t, int64(1), za.n.Load(), "one ZMSCORE on the source (its op records)")
	require.Equal(t, int64(2), zb.n.Load(), "one ZMSCORE per expiry set on the target, not one per item")
	require.Equal(t, Digest{Records: 1}, withoutSum(v.a.d))
	require.Equal(t, Digest{Records: 2, Tombstones: 1, Ops: 1}, withoutSum(v.b.d), "expired items left both digests")

	_, err = c.finish(ctx, r, v)
	var ve *VerifyError
	require.True(t, errors.As(err, &ve), "got %v", err)
	require.Equal(t, []string{"both", "live", "young-op", "young-tomb"}, ve.Differ)
}

func withoutSum(d Digest) Digest { d.Sum = 0; return d }
