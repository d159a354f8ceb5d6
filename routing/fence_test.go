package routing_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

func TestFencedTransitionRefusesAnOlderEpochAfterANewerOneActed(t *testing.T) {
	f := newFleet(t)
	ctx := testkit.Ctx(t)
	for _, name := range []string{"a", "k"} {
		t.Run(name, func(t *testing.T) {
			s := f.shard(t, name)
			u := routing.TenantUnit("fenced-" + name)
			imp := routing.Ownership{Generation: 3, State: routing.StateImporting}
			// Epoch 5 acts first (even a compare-and-set that fails raises the fence).
			_, err := s.TransitionFenced(ctx, u, routing.Ownership{Generation: 2, State: routing.StateOpen}, imp, 5)
			require.ErrorIs(t, err, routing.ErrOwnershipChanged)
			// Epoch 4 wakes up late: refused, nothing written.
			_, err = s.TransitionFenced(ctx, u, routing.Ownership{}, imp, 4)
			require.ErrorIs(t, err, routing.ErrFenced)
			var fe *routing.FencedError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, uint64(5), fe.Fence)
			o, _, err := s.Ownership(ctx, u)
			require.NoError(t, err)
			require.Equal(t, routing.Ownership{}, o)
			// The same and a newer epoch act; an unfenced transition is not checked.
			_, err = s.TransitionFenced(ctx, u, routing.Ownership{}, imp, 5)
			require.NoError(t, err)
			_, err = s.TransitionFenced(ctx, u, imp, routing.Ownership{Generation: 3, State: "cancelled"}, 6)
			require.NoError(t, err)
			_, err = s.TransitionFenced(ctx, u, routing.Ownership{Generation: 3, State: "cancelled"}, imp, 5)
			require.ErrorIs(t, err, routing.ErrFenced)
			_, err = s.TransitionFenced(ctx, u, imp, imp, 0)
			require.ErrorIs(t, err, routing.ErrInvalid)
		})
	}
}

func TestGuardedPublishOnlyWhileTheGuardHolds(t *testing.T) {
	f := newFleet(t)
	ctx := testkit.Ctx(t)
	st := f.store(t)
	t1 := routing.EvenTable(1, 4, "a", "b")
	require.NoError(t, st.Publish(ctx, t1))
	guard := st.Keys().ControlTag() + ":guard"
	require.NoError(t, f.control.HSet(ctx, guard, "epoch", "7").Err())
	t2 := t1.Next()
	t2.SetBucket(0, "b")
	err := st.PublishGuarded(ctx, t2, guard, map[string]string{"epoch": "6"})
	require.ErrorIs(t, err, routing.ErrFenced)
	cur, err := st.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), cur.Generation, "nothing published")
	require.NoError(t, st.PublishGuarded(ctx, t2, guard, map[string]string{"epoch": "7"}))
	require.NoError(t, st.PublishGuarded(ctx, t2, guard, map[string]string{"epoch": "7"}), "a retry after a lost reply")
	err = st.PublishGuarded(ctx, t2.Next(), "elsewhere", map[string]string{"epoch": "7"})
	require.ErrorIs(t, err, routing.ErrInvalid, "a guard outside the table's slot")
}

// Every migration leaves a closed record on its old source, and a cancelled one a
// "cancelled" record on its target; neither may stop a brand-new override from being placed.
func TestProvisionPlacesANewOverrideAfterMigrationsLeftHistory(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
	ctx := testkit.Ctx(t)
	st := f.store(t)
	t1 := routing.EvenTable(1, 4, "a", "b")
	t1.Shards = shardNames
	require.NoError(t, st.Publish(ctx, t1))
	awaitGen(t, r, 1)
	_, err := r.Provision(ctx)
	require.NoError(t, err)
	// Bucket 0 moved a -> b (a keeps it closed), and a cancelled import of bucket 1 on c.
	f.moveUnit(t, routing.BucketUnit(0), t1.BucketOwner(0), "c", 2)
	t2 := t1.Next()
	t2.SetBucket(0, "c")
	require.NoError(t, st.Publish(ctx, t2))
	_, err = f.shard(t, "k").Transition(ctx, routing.BucketUnit(1), routing.Ownership{},
		routing.Ownership{Generation: 2, State: "cancelled"})
	require.NoError(t, err)

	t3 := t2.Next()
	t3.SetOverride("brand-new", "k")
	require.NoError(t, st.Publish(ctx, t3))
	awaitGen(t, r, 3)
	n, err := r.Provision(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	res, err := r.Do(ctx, "brand-new", "first", routing.Put("k", "v"))
	require.NoError(t, err)
	require.True(t, res.Applied)

	// An import in progress elsewhere still stops it.
	_, err = f.shard(t, "a").Transition(ctx, routing.TenantUnit("other-new"), routing.Ownership{},
		routing.Ownership{Generation: 4, State: routing.StateImporting})
	require.NoError(t, err)
	t4 := t3.Next()
	t4.SetOverride("other-new", "k")
	require.NoError(t, st.Publish(ctx, t4))
	awaitGen(t, r, 4)
	_, err = r.Provision(ctx)
	require.ErrorIs(t, err, routing.ErrOwnershipChanged)
}

func TestProvisionRefusesAnOverrideThatWouldHideTheTenantsData(t *testing.T) {
	for _, what := range []string{"records", "tombstone", "op record"} {
		t.Run(what, func(t *testing.T) {
			f := newFleet(t)
			r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
			ctx := testkit.Ctx(t)
			st := f.store(t)
			t1 := routing.EvenTable(1, 4, "a", "b")
			t1.Shards = shardNames
			require.NoError(t, st.Publish(ctx, t1))
			awaitGen(t, r, 1)
			_, err := r.Provision(ctx)
			require.NoError(t, err)
			tenant := "shop"
			switch what {
			case "records":
				for i := 0; i < 10; i++ {
					_, err := r.Do(ctx, tenant, fmt.Sprint("put-", i), routing.Put(fmt.Sprint("k", i), "v"))
					require.NoError(t, err)
				}
			case "tombstone":
				_, err := r.Do(ctx, tenant, "put", routing.Put("k", "v"))
				require.NoError(t, err)
				_, err = r.Do(ctx, tenant, "del", routing.Delete("k"))
				require.NoError(t, err)
				// Drop the put's and delete's op records: only the tombstone is left.
				b := uint32(hashing.Bucket(tenant, uint64(t1.Buckets)))
				k := routingfmt.Keys(f.shard(t, "a").Keys().Tag(routing.BucketUnit(b)))
				require.NoError(t, celebritytest.AdminOf(t, f.clients[t1.BucketOwner(b)]).Del(ctx, k.Ops).Err())
			case "op record":
				// A delete of an absent key leaves only an op record.
				_, err := r.Do(ctx, tenant, "del", routing.Delete("never"))
				require.NoError(t, err)
			}
			// Another tenant of another bucket is there too and does not matter.
			_, err = r.Do(ctx, "someone-else", "x", routing.Put("k", "v"))
			require.NoError(t, err)

			t2 := t1.Next()
			t2.SetOverride(tenant, "c")
			require.NoError(t, st.Publish(ctx, t2))
			awaitGen(t, r, 2)
			_, err = r.Provision(ctx)
			require.ErrorIs(t, err, routing.ErrTenantHasData)
			require.ErrorContains(t, err, "tenant migration")
			o, _, err := f.shard(t, "c").Ownership(ctx, routing.TenantUnit(tenant))
			require.NoError(t, err)
			require.Equal(t, routing.Ownership{}, o, "no empty unit was opened")
			b := uint32(hashing.Bucket(tenant, uint64(t1.Buckets)))
			_, moved, err := f.shard(t, t1.BucketOwner(b)).Ownership(ctx, routing.BucketUnit(b))
			require.NoError(t, err)
			require.NotContains(t, moved, tenant, "the tenant was not marked as moved out")
		})
	}
}

func TestTenantNamesThatAreNotUTF8AreRefusedEverywhere(t *testing.T) {
	f := newFleet(t)
	r := f.router(t, routing.Options{PollInterval: time.Hour}, nil)
	ctx := testkit.Ctx(t)
	st := f.store(t)
	bad := "shop\xff\xfe"
	t1 := routing.EvenTable(1, 4, "a", "b")
	t1.Shards = shardNames
	require.NoError(t, st.Publish(ctx, t1))
	awaitGen(t, r, 1)
	t2 := t1.Next()
	t2.SetOverride(bad, "c")
	require.ErrorIs(t, st.Publish(ctx, t2), routing.ErrInvalidTable)
	t2 = t1.Next()
	t2.SetSpread(bad, []string{"a", "c"})
	require.ErrorIs(t, st.Publish(ctx, t2), routing.ErrInvalidTable)
	cur, err := st.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), cur.Generation)

	_, err = r.Do(ctx, bad, "op", routing.Put("k", "v"))
	require.ErrorIs(t, err, routing.ErrInvalid)
	_, _, err = r.Get(ctx, bad, "k")
	require.ErrorIs(t, err, routing.ErrInvalid)
	_, err = r.Route(bad, "k")
	require.ErrorIs(t, err, routing.ErrInvalid)
	require.ErrorIs(t, routing.TenantUnit(bad).Validate(), routing.ErrInvalid)
	require.ErrorIs(t, routing.SpreadUnit(bad, 0).Validate(), routing.ErrInvalid)
	_, err = f.shard(t, "a").Exec(ctx, routing.BucketUnit(0), 1, bad, "op", routing.Put("k", "v"))
	require.ErrorIs(t, err, routing.ErrInvalid)

	// The valid tenant the mangled name would have become keeps its own route.
	good := "shop\uFFFD\uFFFD"
	route, err := r.Route(good, "k")
	require.NoError(t, err)
	require.Equal(t, routing.KindBucket, route.Unit.Kind)
}

// TransitionFencedIfReady changes the record only while its "ready" field holds the given
// mark, checked in the same script: a record restored to a point before the mark (or one
// whose mark names another migration) is refused with ErrNotReady and left as it was; a
// retry of a transition already made succeeds.
func TestTransitionIfReadyRefusesARecordWithoutItsMark(t *testing.T) {
	f := newFleet(t)
	ctx := testkit.Ctx(t)
	for _, name := range []string{"a", "k"} {
		t.Run(name, func(t *testing.T) {
			s := f.shard(t, name)
			u := routing.TenantUnit("ready-" + name)
			own := routingfmt.Keys(s.Keys().Tag(u)).Own
			admin := celebritytest.AdminOf(t, f.clients[name])
			imp := routing.Ownership{Generation: 3, State: routing.StateImporting}
			open := routing.Ownership{Generation: 4, State: routing.StateOpen}
			_, err := s.TransitionFenced(ctx, u, routing.Ownership{}, imp, 1)
			require.NoError(t, err)

			_, err = s.TransitionFencedIfReady(ctx, u, imp, open, 1, "m1")
			require.ErrorIs(t, err, routing.ErrNotReady, "no mark")
			require.ErrorIs(t, err, routing.ErrOwnershipChanged)
			require.NoError(t, admin.HSet(ctx, own, "ready", "m0").Err())
			_, err = s.TransitionFencedIfReady(ctx, u, imp, open, 1, "m1")
			require.ErrorIs(t, err, routing.ErrNotReady, "another migration's mark")
			o, _, err := s.Ownership(ctx, u)
			require.NoError(t, err)
			require.Equal(t, imp, o, "nothing changed")

			require.NoError(t, admin.HSet(ctx, own, "ready", "m1").Err())
			_, err = s.TransitionFencedIfReady(ctx, u, imp, open, 1, "m1")
			require.NoError(t, err)
			_, err = s.TransitionFencedIfReady(ctx, u, imp, open, 1, "m1")
			require.NoError(t, err, "a retry of the transition made")
			o, _, err = s.Ownership(ctx, u)
			require.NoError(t, err)
			require.Equal(t, open, o)

			_, err = s.TransitionFencedIfReady(ctx, u, open, imp, 1, "")
			require.ErrorIs(t, err, routing.ErrInvalid)
		})
	}
}
