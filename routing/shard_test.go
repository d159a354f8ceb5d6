package routing_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

func TestWriteWithOlderGenerationIsRefusedAndChangesNothing(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		s := newShard(t, "a", c, prefix(t), routing.ShardOptions{})
		u := routing.BucketUnit(4)
		open(t, s, u, 12)
		k := routingfmt.Keys(s.Keys().Tag(u))

		_, err := s.Exec(ctx, u, 11, "course", "op-1", routing.Put("seat", "alice"))
		var stale *routing.StaleRouteError
		require.ErrorAs(t, err, &stale)
		require.ErrorIs(t, err, routing.ErrStaleRoute)
		require.Equal(t, routing.Ownership{Generation: 12, State: routing.StateOpen}, stale.Owner)
		require.Equal(t, uint64(11), stale.Sent)
		for _, key := range []string{k.Records, k.Ops, k.OpExpiry, k.Tombstones, k.Log} {
			n, err := c.Exists(ctx, key).Result()
			require.NoError(t, err)
			require.Zero(t, n, "key %s must not exist after a stale write", key)
		}
		_, _, err = s.Get(ctx, u, 11, "course", "seat")
		require.ErrorIs(t, err, routing.ErrStaleRoute)

		// The owner's generation and any newer one are admitted.
		for i, gen := range []uint64{12, 13} {
			res, err := s.Exec(ctx, u, gen, "course", "op-ok-"+string(rune('a'+i)), routing.Put("seat", "alice"))
			require.NoError(t, err)
			require.True(t, res.Applied)
			require.Equal(t, uint64(i+1), res.Version)
		}
		require.Len(t, logEntries(t, c, s, u), 2)
	})
}

func TestUnitWithoutRecordOrClosedRefusesWrites(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		s := newShard(t, "a", c, prefix(t), routing.ShardOptions{})
		u := routing.TenantUnit("acme")

		_, err := s.Exec(ctx, u, 5, "acme", "op-1", routing.Put("k", "v"))
		var stale *routing.StaleRouteError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, routing.StateNone, stale.Owner.State)

		open(t, s, u, 5)
		_, err = s.Exec(ctx, u, 5, "acme", "op-2", routing.Put("k", "v"))
		require.NoError(t, err)

		open5 := routing.Ownership{Generation: 5, State: routing.StateOpen}
		closed5 := routing.Ownership{Generation: 5, State: routing.StateClosed}
		last, err := s.Transition(ctx, u, open5, closed5)
		require.NoError(t, err)
		entries := logEntries(t, c, s, u)
		require.Len(t, entries, 1)
		require.Equal(t, entries[0].ID, last, "the barrier returns the last change-log ID")

		_, err = s.Exec(ctx, u, 5, "acme", "op-3", routing.Put("k", "w"))
		require.ErrorAs(t, err, &stale)
		require.Equal(t, closed5, stale.Owner)
		_, err = s.Exec(ctx, u, 9, "acme", "op-3", routing.Put("k", "w"))
		require.ErrorIs(t, err, routing.ErrStaleRoute, "a closed unit refuses newer generations too")

		// A retried transition succeeds again and returns the same final position.
		again, err := s.Transition(ctx, u, open5, closed5)
		require.NoError(t, err)
		require.Equal(t, last, again)
		// A transition from a record that is no longer there changes nothing.
		_, err = s.Transition(ctx, u, open5, routing.Ownership{Generation: 6, State: routing.StateOpen})
		require.ErrorIs(t, err, routing.ErrOwnershipChanged)
		o, _, err := s.Ownership(ctx, u)
		require.NoError(t, err)
		require.Equal(t, closed5, o)
		// Generations never go backwards.
		_, err = s.Transition(ctx, u, closed5, routing.Ownership{Generation: 4, State: routing.StateOpen})
		require.ErrorIs(t, err, routing.ErrInvalid)
	})
}

func TestRetriedOperationReturnsItsFirstResult(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		s := newShard(t, "a", c, prefix(t), routing.ShardOptions{})
		u := routing.BucketUnit(1)
		open(t, s, u, 1)

		first, err := s.Exec(ctx, u, 1, "t", "op-1", routing.Put("k", "v1"))
		require.NoError(t, err)
		require.Equal(t, routing.Result{Applied: true, Version: 1}, first)
		_, err = s.Exec(ctx, u, 1, "t", "op-2", routing.Put("k", "v2"))
		require.NoError(t, err)

		again, err := s.Exec(ctx, u, 1, "t", "op-1", routing.Put("k", "v1"))
		require.NoError(t, err)
		require.Equal(t, routing.Result{Applied: true, Version: 1, Replayed: true}, again)
		r, ok, err := s.Get(ctx, u, 1, "t", "k")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, routing.Record{Version: 2, Value: "v2"}, r, "the replay must not re-apply")

		for _, other := range []routing.Op{routing.Put("k", "v9"), routing.Delete("k"), routing.PutIf("k", "v1", 0), routing.Put("k2", "v1")} {
			_, err = s.Exec(ctx, u, 1, "t", "op-1", other)
			require.ErrorIs(t, err, routing.ErrConflict, "%+v", other)
		}
		// Operation IDs are per tenant: another tenant's op-1 is its own operation.
		res, err := s.Exec(ctx, u, 1, "other-tenant", "op-1", routing.Put("k", "v1"))
		require.NoError(t, err)
		require.Equal(t, routing.Result{Applied: true, Version: 1}, res)
		require.Len(t, logEntries(t, c, s, u), 3)
	})
}

func TestVersionedRecordStore(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		s := newShard(t, "a", c, prefix(t), routing.ShardOptions{})
		u := routing.SpreadUnit("big", 3)
		open(t, s, u, 2)
		exec := func(id string, op routing.Op) (routing.Result, error) {
			return s.Exec(ctx, u, 2, "big", id, op)
		}

		res, err := exec("1", routing.PutIf("k", "a", 0))
		require.NoError(t, err)
		require.Equal(t, uint64(1), res.Version)
		_, err = exec("2", routing.PutIf("k", "b", 0))
		var mm *routing.VersionMismatchError
		require.ErrorAs(t, err, &mm)
		require.Equal(t, uint64(1), mm.Current)
		_, err = exec("2", routing.PutIf("k", "b", 0))
		require.ErrorIs(t, err, routing.ErrVersionMismatch, "a retried mismatch reports the same mismatch")

		res, err = exec("3", routing.DeleteIf("k", 1))
		require.NoError(t, err)
		require.Equal(t, routing.Result{Applied: true, Version: 2}, res)
		r, ok, err := s.Get(ctx, u, 2, "big", "k")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, routing.Record{Version: 2, Deleted: true}, r)

		res, err = exec("4", routing.Delete("k"))
		require.NoError(t, err)
		require.Equal(t, routing.Result{}, res, "deleting a deleted key changes nothing")
		res, err = exec("5", routing.PutIf("k", "c", 0))
		require.NoError(t, err)
		require.Equal(t, uint64(3), res.Version, "versions keep growing across a delete")

		_, ok, err = s.Get(ctx, u, 2, "big", "missing")
		require.NoError(t, err)
		require.False(t, ok)

		entries := logEntries(t, c, s, u)
		kinds := make([]string, len(entries))
		for i, e := range entries {
			kinds[i] = e.Kind
		}
		require.Equal(t, []string{"put", "noop", "del", "noop", "put"}, kinds)
		require.Equal(t, routingfmt.RecordField("big", "k"), entries[4].Field)
		require.Equal(t, routing.Record{Version: 3, Value: "c"}, entries[4].Record)
		require.Equal(t, routing.OpKey("big", "5"), entries[4].OpID)
		require.Equal(t, routingfmt.OpRecord{Fingerprint: entries[4].Op.Fingerprint, Outcome: routingfmt.OutcomeApplied,
			Version: 3, Field: routingfmt.RecordField("big", "k")}, entries[4].Op)
		raw, err := c.HGet(ctx, routingfmt.Keys(s.Keys().Tag(u)).Ops, routing.OpKey("big", "5")).Result()
		require.NoError(t, err)
		require.Equal(t, routingfmt.EncodeOpRecord(entries[4].Op), raw, "the op record in Ops equals the logged one")
		require.Zero(t, entries[4].TombstoneExpiry)
		require.Positive(t, entries[2].TombstoneExpiry, "a delete logs its tombstone's expiry")
		require.Equal(t, entries[2].OpExpiry, entries[2].TombstoneExpiry, "both retentions default to 24h")
	})
}

func TestTenantMovedOutOfBucketIsRefused(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		s := newShard(t, "a", c, prefix(t), routing.ShardOptions{})
		u := routing.BucketUnit(7)
		open(t, s, u, 3)
		_, err := s.Exec(ctx, u, 3, "fat", "op-1", routing.Put("k", "v"))
		require.NoError(t, err)

		o := routing.Ownership{Generation: 3, State: routing.StateOpen}
		o4 := routing.Ownership{Generation: 4, State: routing.StateOpen}
		last, err := s.MarkMoved(ctx, u, "fat", true, o, o4)
		require.NoError(t, err)
		require.Equal(t, logEntries(t, c, s, u)[0].ID, last)

		_, err = s.Exec(ctx, u, 4, "fat", "op-2", routing.Put("k", "w"))
		var stale *routing.StaleRouteError
		require.ErrorAs(t, err, &stale)
		require.True(t, stale.Moved)
		_, err = s.Exec(ctx, u, 4, "thin", "op-3", routing.Put("k", "w"))
		require.NoError(t, err, "other tenants of the bucket are unaffected")

		_, moved, err := s.Ownership(ctx, u)
		require.NoError(t, err)
		require.Equal(t, map[string]uint64{"fat": 4}, moved)
		_, err = s.MarkMoved(ctx, u, "fat", false, o4, o4)
		require.NoError(t, err)
		_, err = s.Exec(ctx, u, 4, "fat", "op-2", routing.Put("k", "w"))
		require.NoError(t, err)
	})
}

func TestLostReplyRetriedByClientAppliesOnce(t *testing.T) {
	srv := celebritytest.Standalone(t)
	inj := faults.New()
	c := srv.Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil) })
	ctx := testkit.Ctx(t)
	s := newShard(t, "a", c, prefix(t), routing.ShardOptions{})
	u := routing.BucketUnit(9)
	open(t, s, u, 1)
	// Load the script first so the dropped command is the EVALSHA that writes.
	_, err := s.Exec(ctx, u, 1, "t", "warm", routing.Put("w", "x"))
	require.NoError(t, err)

	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "op-lost"}, 1)
	res, err := s.Exec(ctx, u, 1, "t", "op-lost", routing.Put("k", "v"))
	require.NoError(t, err, "go-redis retries the command whose reply was lost")
	require.Equal(t, int64(1), inj.Dropped())
	require.Equal(t, routing.Result{Applied: true, Version: 1, Replayed: true}, res,
		"the retry finds the first attempt's record")
	require.Len(t, logEntries(t, c, s, u), 2)
}

func TestExpiredOpRecordsAndTombstonesArePurged(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		now := time.Unix(1_700_000_000, 0)
		s := newShard(t, "a", c, prefix(t), routing.ShardOptions{
			OpRetention: time.Minute, TombstoneRetention: time.Hour,
			Clock: func() time.Time { return now },
		})
		u := routing.BucketUnit(0)
		open(t, s, u, 1)
		k := routingfmt.Keys(s.Keys().Tag(u))
		_, err := s.Exec(ctx, u, 1, "t", "op-1", routing.Put("k", "v"))
		require.NoError(t, err)
		_, err = s.Exec(ctx, u, 1, "t", "op-2", routing.Delete("k"))
		require.NoError(t, err)

		now = now.Add(2 * time.Minute) // op records expired, tombstone not yet
		_, err = s.Exec(ctx, u, 1, "t", "op-3", routing.Put("other", "v"))
		require.NoError(t, err)
		ops, err := celebritytest.AdminOf(t, c).HKeys(ctx, k.Ops).Result()
		require.NoError(t, err)
		require.Equal(t, []string{routing.OpKey("t", "op-3")}, ops)
		_, ok, err := s.Get(ctx, u, 1, "t", "k")
		require.NoError(t, err)
		require.True(t, ok, "the tombstone outlives the op records")

		now = now.Add(2 * time.Hour)
		_, err = s.Exec(ctx, u, 1, "t", "op-4", routing.Put("other", "w"))
		require.NoError(t, err)
		_, ok, err = s.Get(ctx, u, 1, "t", "k")
		require.NoError(t, err)
		require.False(t, ok, "the tombstone is gone after its retention")
	})
}

func TestVersionsNeverGoBackwardsAfterATombstoneExpires(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		now := time.Unix(1_700_000_000, 0)
		s := newShard(t, "a", c, prefix(t), routing.ShardOptions{
			OpRetention: time.Minute, TombstoneRetention: time.Minute,
			Clock: func() time.Time { return now },
		})
		u := routing.BucketUnit(0)
		open(t, s, u, 1)
		for i, op := range []routing.Op{routing.Put("k", "v1"), routing.Put("k", "v2"), routing.Delete("k")} {
			_, err := s.Exec(ctx, u, 1, "t", fmt.Sprintf("op-%d", i), op)
			require.NoError(t, err)
		}
		now = now.Add(2 * time.Minute)
		_, err := s.Exec(ctx, u, 1, "t", "op-other", routing.Put("other", "v"))
		require.NoError(t, err)
		_, ok, err := s.Get(ctx, u, 1, "t", "k")
		require.NoError(t, err)
		require.False(t, ok, "precondition: the tombstone (version 3) was purged")

		// A client that read version 2 before the delete must not see its stale
		// compare-and-set land on a new record that happens to reach version 2 again.
		res, err := s.Exec(ctx, u, 1, "t", "op-new-1", routing.Put("k", "n1"))
		require.NoError(t, err)
		require.Equal(t, uint64(4), res.Version, "a new record starts above every purged version")
		res, err = s.Exec(ctx, u, 1, "t", "op-new-2", routing.Put("k", "new"))
		require.NoError(t, err)
		require.Equal(t, uint64(5), res.Version)
		_, err = s.Exec(ctx, u, 1, "t", "op-stale-cas", routing.PutIf("k", "stale", 2))
		var mm *routing.VersionMismatchError
		require.ErrorAs(t, err, &mm)
		rec, ok, err := s.Get(ctx, u, 1, "t", "k")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "new", rec.Value)
	})
}

// The fingerprint is a 64-bit hash; the op record also names the record field it addressed,
// so that even a fingerprint collision never hands one tenant's (or key's) result to another.
func TestReplayNeedsTheSameRecordFieldNotOnlyTheFingerprint(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		s := newShard(t, "a", c, prefix(t), routing.ShardOptions{})
		u := routing.BucketUnit(2)
		open(t, s, u, 1)
		_, err := s.Exec(ctx, u, 1, "alice", "op-1", routing.Put("k", "v"))
		require.NoError(t, err)
		k := routingfmt.Keys(s.Keys().Tag(u))
		stored, err := c.HGet(ctx, k.Ops, routing.OpKey("alice", "op-1")).Result()
		require.NoError(t, err)
		rec, err := routingfmt.DecodeOpRecord(stored)
		require.NoError(t, err)
		require.Equal(t, routingfmt.RecordField("alice", "k"), rec.Field)

		// Stand-in for a collision: bob's record under op-2 carries the fingerprint of
		// alice's op, with bob's field.
		rec.Field = routingfmt.RecordField("bob", "k")
		require.NoError(t, c.HSet(ctx, k.Ops, routing.OpKey("alice", "op-2"), routingfmt.EncodeOpRecord(rec)).Err())
		_, err = s.Exec(ctx, u, 1, "alice", "op-2", routing.Put("k", "v"))
		require.ErrorIs(t, err, routing.ErrConflict, "bob's result is not alice's")
		again, err := s.Exec(ctx, u, 1, "alice", "op-1", routing.Put("k", "v"))
		require.NoError(t, err)
		require.True(t, again.Replayed)
	})
}
