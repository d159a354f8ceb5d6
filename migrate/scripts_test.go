package migrate

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// scriptRig runs migrate's shard scripts directly against one unit's keys.
type scriptRig struct {
	t  testing.TB
	c  redis.UniversalClient
	k  routingfmt.UnitKeys
	ep *int
}

// epoch is the fencing epoch the rig's calls carry (1 unless the test set *ep).
func (r scriptRig) epoch() int {
	if r.ep == nil || *r.ep == 0 {
		return 1
	}
	return *r.ep
}

func (r scriptRig) prepare(gen int, mig, mode string) []string {
	r.t.Helper()
	k := r.k
	out, err := prepareScript.Run(testkit.Ctx(r.t), r.c, []string{k.Own, k.Records, k.Ops, k.OpExpiry, k.Tombstones, k.Log},
		gen, mig, mode, r.epoch()).StringSlice()
	require.NoError(r.t, err)
	return out
}

func (r scriptRig) apply(gen int, mig string, now int64, items ...string) []string {
	r.t.Helper()
	k := r.k
	args := []any{gen, mig, now, r.epoch()}
	for _, it := range items {
		args = append(args, it)
	}
	out, err := applyScript.Run(testkit.Ctx(r.t), r.c, []string{k.Own, k.Records, k.Ops, k.OpExpiry, k.Tombstones}, args...).StringSlice()
	require.NoError(r.t, err)
	return out
}

func (r scriptRig) hget(key, field string) string {
	v, _ := r.c.HGet(testkit.Ctx(r.t), key, field).Result()
	return v
}

func TestApplyIsOrderInsensitiveAndRefusesOlderVersions(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		p := strings.TrimSuffix(celebritytest.NewPrefix(t), ":")
		r := scriptRig{t: t, c: c, k: routingfmt.Keys(routing.Keys{Prefix: p}.Tag(routing.BucketUnit(3)))}
		ctx := testkit.Ctx(t)

		require.Equal(t, "stale", r.apply(5, "m1", 1000, "r", "f", "1:l:x", "0")[0], "no import claimed")
		require.Equal(t, []string{"ok", "5", "importing"}, r.prepare(5, "m1", "prepare"))

		// The log's tombstone v2 arrives first; the snapshot's late copy of v1 is refused.
		require.Equal(t, []string{"ok", "1", "0"}, r.apply(5, "m1", 1000, "r", "f", "2:t:", "90000"))
		require.Equal(t, []string{"ok", "0", "1"}, r.apply(5, "m1", 1000, "r", "f", "1:l:old", "0"))
		require.Equal(t, "2:t:", r.hget(r.k.Records, "f"))
		sc, err := c.ZScore(ctx, r.k.Tombstones, "f").Result()
		require.NoError(t, err)
		require.Equal(t, float64(90000), sc, "the tombstone keeps its retention")
		// A newer put replaces the tombstone.
		require.Equal(t, []string{"ok", "1", "0"}, r.apply(5, "m1", 1000, "r", "f", "3:l:new", "0"))
		require.Zero(t, c.Exists(ctx, r.k.Tombstones).Val())
		// The same version again is a no-op; with other content it is a conflict, and the
		// whole batch is refused.
		require.Equal(t, []string{"ok", "0", "1"}, r.apply(5, "m1", 1000, "r", "f", "3:l:new", "0"))
		out := r.apply(5, "m1", 1000, "r", "g", "1:l:g", "0", "r", "f", "3:l:other", "0")
		require.Equal(t, []string{"conflict", "r", "f", "3:l:new", "3:l:other"}, out)
		require.Empty(t, r.hget(r.k.Records, "g"), "nothing of a conflicting batch is written")

		// Op records: stored once, never changed; expired ones are not copied.
		require.Equal(t, []string{"ok", "1", "0"}, r.apply(5, "m1", 1000, "o", "op1", "abc:ok:3", "5000"))
		require.Equal(t, []string{"ok", "0", "1"}, r.apply(5, "m1", 1000, "o", "op1", "abc:ok:3", "5000"))
		require.Equal(t, "conflict", r.apply(5, "m1", 1000, "o", "op1", "abc:ok:4", "5000")[0])
		require.Equal(t, []string{"ok", "0", "1"}, r.apply(5, "m1", 6000, "o", "op2", "abc:ok:1", "5000"))
		require.Equal(t, []string{"ok", "1", "0"}, r.apply(5, "m1", 1000, "o", "op3", "abc:ok:1:6:coursek", "5000"),
			"op records that name their field")
		require.Empty(t, r.hget(r.k.Ops, "op2"))

		// Bad arguments are refused before any write.
		_, err = applyScript.Run(ctx, c, []string{r.k.Own, r.k.Records, r.k.Ops, r.k.OpExpiry, r.k.Tombstones},
			5, "m1", 1000, 1, "r", "h", "nonsense", "0").Result()
		require.ErrorContains(t, err, "malformed record")
		require.Equal(t, "stale", r.apply(5, "other", 1000, "r", "h", "1:l:h", "0")[0], "another migration's import")
	})
}

func TestPrepareNeverTouchesAnOwnedUnitAndWipesStaleCopies(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		p := strings.TrimSuffix(celebritytest.NewPrefix(t), ":")
		u := routing.BucketUnit(9)
		r := scriptRig{t: t, c: c, k: routingfmt.Keys(routing.Keys{Prefix: p}.Tag(u))}
		ctx := testkit.Ctx(t)
		s, err := routing.NewShard("x", c, routing.ShardOptions{Prefix: p})
		require.NoError(t, err)
		_, err = s.Transition(ctx, u, routing.Ownership{}, routing.Ownership{Generation: 3, State: routing.StateOpen})
		require.NoError(t, err)
		_, err = s.Exec(ctx, u, 3, "t", "op", routing.Put("k", "v"))
		require.NoError(t, err)

		require.Equal(t, "refused", r.prepare(4, "m", "prepare")[0], "an open unit is never imported into")
		require.Equal(t, "refused", r.prepare(4, "m", "reset")[0])
		_, err = s.Transition(ctx, u, routing.Ownership{Generation: 3, State: routing.StateOpen},
			routing.Ownership{Generation: 3, State: routing.StateClosed})
		require.NoError(t, err)
		require.Equal(t, "refused", r.prepare(2, "m", "prepare")[0], "an older generation")
		require.Equal(t, []string{"ok", "4", "importing"}, r.prepare(4, "m", "prepare"))
		for _, key := range []string{r.k.Records, r.k.Ops, r.k.OpExpiry, r.k.Log} {
			require.Zero(t, c.Exists(ctx, key).Val(), "the closed copy's %s was wiped", key)
		}
		require.Equal(t, "refused", r.prepare(4, "n", "prepare")[0], "claimed by another migration")
		require.Equal(t, "ok", r.apply(4, "m", 0, "r", "k", "1:l:v", "0")[0])
		require.Equal(t, []string{"ok", "4", "importing"}, r.prepare(4, "m", "prepare"), "a retried claim keeps the copy")
		require.Equal(t, "1:l:v", r.hget(r.k.Records, "k"))
		_, err = prepareScript.Run(ctx, c, []string{r.k.Own, r.k.Records, r.k.Ops, r.k.OpExpiry, r.k.Tombstones, r.k.Log},
			4, "m", "floor", 1, "7").Result()
		require.NoError(t, err)
		require.Equal(t, "7", r.hget(r.k.Own, "vfloor"), "the source's version floor is carried over")
		_, err = prepareScript.Run(ctx, c, []string{r.k.Own, r.k.Records, r.k.Ops, r.k.OpExpiry, r.k.Tombstones, r.k.Log},
			4, "m", "floor", 1, "3").Result()
		require.NoError(t, err)
		require.Equal(t, "7", r.hget(r.k.Own, "vfloor"), "the floor never goes down")
		require.Equal(t, []string{"ok", "4", "cancelled"}, r.prepare(4, "m", "abandon"))
		require.Zero(t, c.Exists(ctx, r.k.Records).Val())
		require.Equal(t, []string{"ok", "4", "cancelled"}, r.prepare(4, "m", "abandon"), "abandon is idempotent")
		o, _, err := s.Ownership(ctx, u)
		require.NoError(t, err)
		require.Equal(t, routing.Ownership{Generation: 4, State: "cancelled"}, o)
		_, err = s.Exec(ctx, u, 9, "t", "op2", routing.Put("k", "w"))
		require.ErrorIs(t, err, routing.ErrStaleRoute, "a cancelled import refuses writes")
	})
}

func TestShardScriptsRefuseAnOlderEpochOnceANewerOneActed(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		p := strings.TrimSuffix(celebritytest.NewPrefix(t), ":")
		u := routing.BucketUnit(11)
		ep := 3
		r := scriptRig{t: t, c: c, k: routingfmt.Keys(routing.Keys{Prefix: p}.Tag(u)), ep: &ep}
		require.Equal(t, []string{"ok", "5", "importing"}, r.prepare(5, "m", "prepare"))
		require.Equal(t, "ok", r.apply(5, "m", 1000, "r", "k", "1:l:v", "0")[0])
		// A newer driver of the same migration acts (a retried claim: nothing else changes).
		ep = 4
		require.Equal(t, []string{"ok", "5", "importing"}, r.prepare(5, "m", "prepare"))
		ep = 3
		require.Equal(t, []string{"fenced", "4"}, r.apply(5, "m", 1000, "r", "k2", "1:l:v", "0"))
		require.Equal(t, []string{"fenced", "4"}, r.prepare(5, "m", "reset"))
		require.Equal(t, []string{"fenced", "4"}, r.prepare(5, "m", "abandon"))
		require.Empty(t, r.hget(r.k.Records, "k2"), "nothing written")
		require.Equal(t, "1:l:v", r.hget(r.k.Records, "k"))
		// A Cancel (epoch 5) abandons; the zombie (epoch 4) cannot claim again.
		ep = 5
		require.Equal(t, []string{"ok", "5", "cancelled"}, r.prepare(5, "m", "abandon"))
		ep = 4
		require.Equal(t, []string{"fenced", "5"}, r.prepare(5, "m", "prepare"))
		// Abandon also fences a target that was never claimed.
		u2 := routing.BucketUnit(12)
		r2 := scriptRig{t: t, c: c, k: routingfmt.Keys(routing.Keys{Prefix: p}.Tag(u2)), ep: &ep}
		ep = 7
		require.Equal(t, []string{"ok", "0", ""}, r2.prepare(5, "m2", "abandon"))
		ep = 6
		require.Equal(t, []string{"fenced", "7"}, r2.prepare(5, "m2", "prepare"))
		// Another migration's claim holds nothing of this one: abandon is done, and a clear
		// only removes the named migration's claim.
		ep = 8
		require.Equal(t, []string{"ok", "5", "importing"}, r2.prepare(5, "m3", "prepare"))
		require.Equal(t, []string{"ok", "5", "importing"}, r2.prepare(5, "m2", "abandon"))
		require.Equal(t, "refused", r2.prepare(5, "m2", "clear")[0])
		require.Equal(t, []string{"ok", "5", "cancelled"}, r2.prepare(5, "m3", "clear"))
	})
}

// A record closed at generation g (the unit was moved away from this shard at g) is never
// claimed by an import at g: only a zombie of an old migration would ask for that.
func TestPrepareRefusesARecordClosedAtTheImportGeneration(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		p := strings.TrimSuffix(celebritytest.NewPrefix(t), ":")
		u := routing.BucketUnit(13)
		r := scriptRig{t: t, c: c, k: routingfmt.Keys(routing.Keys{Prefix: p}.Tag(u))}
		s, err := routing.NewShard("x", c, routing.ShardOptions{Prefix: p})
		require.NoError(t, err)
		ctx := testkit.Ctx(t)
		_, err = s.Transition(ctx, u, routing.Ownership{}, routing.Ownership{Generation: 6, State: routing.StateClosed})
		require.NoError(t, err)
		require.Equal(t, "refused", r.prepare(6, "old", "prepare")[0])
		require.Equal(t, []string{"ok", "7", "importing"}, r.prepare(7, "new", "prepare"))
	})
}
