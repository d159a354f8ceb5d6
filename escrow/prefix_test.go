package escrow

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// centralAt returns a constructor of the Central of capacity 2 named name under a prefix.
func centralAt(t *testing.T, c Client, name string) func(prefix string) *Central {
	return func(prefix string) *Central {
		cl, err := NewCentral(c, CentralOptions{Name: name, Capacity: 2, Prefix: prefix, AllowWeakDurability: true})
		require.NoError(t, err)
		return cl
	}
}

// uniqueName returns a limit name no other test uses: these tests run under the default
// prefixes, shared by every test of the server.
func uniqueName() string { return "seats-" + strconv.FormatUint(rand.Uint64(), 36) }

// A limit created before v0.2.0 lives under PreviousDefaultPrefix. A process of this version
// with the default prefix must not create it anew, with every permit free, while the old
// processes still grant from it; with Prefix set to the old default it uses the old ledger.
func TestCentralInitRefusesALimitThatExistsUnderThePreviousDefaultPrefix(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, admin, name := testkit.Ctx(t), celebritytest.AdminOf(t, c), uniqueName()
		at := centralAt(t, admin, name)
		old := at(PreviousDefaultPrefix)
		require.NoError(t, old.Init(ctx))
		_, err := old.Acquire(ctx, "job-1")
		require.NoError(t, err)

		err = at("").Init(ctx)
		require.ErrorIs(t, err, ErrPreviousPrefix)
		require.ErrorContains(t, err, `set Prefix to "escrow:" on every process`)
		requireNoKeys(t, admin, newLedger(DefaultPrefix, name, "", 1, 2, 2).meta(), at("").marker)

		kept := at(PreviousDefaultPrefix) // the CHANGELOG's migration: the old prefix, set
		require.NoError(t, kept.Init(ctx))
		_, err = kept.Acquire(ctx, "job-2")
		require.NoError(t, err)
		_, err = kept.Acquire(ctx, "job-3")
		require.ErrorIs(t, err, ErrExhausted, "job-1's permit is still held in the old ledger")

		fresh, err := NewCentral(admin, CentralOptions{Name: uniqueName(), Capacity: 2, AllowWeakDurability: true})
		require.NoError(t, err)
		require.NoError(t, fresh.Init(ctx), "a limit new to both prefixes is created under the default")
		require.NoError(t, fresh.Init(ctx), "and Init stays idempotent")
	})
}

func TestPoolInitRefusesAPoolThatExistsUnderThePreviousDefaultPrefix(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, admin, name := testkit.Ctx(t), celebritytest.AdminOf(t, c), uniqueName()
		opts := PoolOptions{Name: name, Capacity: 4, Owners: []Owner{{Name: "eu", First: 1, Last: 2}, {Name: "us", First: 3, Last: 4}},
			AllowWeakDurability: true, AllowSharedWitness: true}
		at := func(prefix string) *Pool {
			o := opts
			o.Prefix = prefix
			p, err := NewPool(admin, o)
			require.NoError(t, err)
			return p
		}
		require.NoError(t, at(PreviousDefaultPrefix).Init(ctx))

		err := at("").Init(ctx)
		require.ErrorIs(t, err, ErrPreviousPrefix)
		upgraded := at("")
		for _, owner := range upgraded.Owners() {
			requireNoKeys(t, admin, upgraded.ledgers[owner].meta(), upgraded.WitnessKey(owner))
		}
		require.NoError(t, at(PreviousDefaultPrefix).Init(ctx))

		opts.Name = uniqueName()
		require.NoError(t, at("").Init(ctx), "a pool new to both prefixes is created under the default")
		require.NoError(t, at("").Init(ctx))
	})
}

// A process upgraded without the migration note's Prefix that skips Init (Init refuses) and
// acquires at once gets ErrLedgerMissing, and is told where the limit is and what to set.
// A limit missing under both prefixes gets ErrLedgerMissing alone.
func TestAcquireWithoutInitNamesThePreviousDefaultPrefix(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, admin, name := testkit.Ctx(t), celebritytest.AdminOf(t, c), uniqueName()
		at := centralAt(t, admin, name)
		require.NoError(t, at(PreviousDefaultPrefix).Init(ctx))
		upgraded := at("")
		_, err := upgraded.Acquire(ctx, "job-1")
		require.ErrorIs(t, err, ErrLedgerMissing)
		require.ErrorIs(t, err, ErrPreviousPrefix)
		require.ErrorContains(t, err, `set Prefix to "escrow:" on every process`)
		require.ErrorIs(t, upgraded.Release(ctx, "job-1"), ErrPreviousPrefix)

		opts := PoolOptions{Name: name, Capacity: 4, Owners: []Owner{{Name: "eu", First: 1, Last: 2}, {Name: "us", First: 3, Last: 4}},
			AllowWeakDurability: true, AllowSharedWitness: true}
		old := opts
		old.Prefix = PreviousDefaultPrefix
		p, err := NewPool(admin, old)
		require.NoError(t, err)
		require.NoError(t, p.Init(ctx))
		p, err = NewPool(admin, opts)
		require.NoError(t, err)
		_, err = p.Acquire(ctx, "eu", "job-1")
		require.ErrorIs(t, err, ErrLedgerMissing)
		require.ErrorIs(t, err, ErrPreviousPrefix)

		_, err = at("").Acquire(ctx, "job-1") // still nothing under the new prefix
		require.ErrorIs(t, err, ErrPreviousPrefix)
		nowhere := centralAt(t, admin, uniqueName())("")
		_, err = nowhere.Acquire(ctx, "job-1")
		require.ErrorIs(t, err, ErrLedgerMissing)
		require.NotErrorIs(t, err, ErrPreviousPrefix, "a limit that exists nowhere is only missing")
	})
}

// requireNoKeys fails t if any of keys exists: a refused Init wrote nothing.
func requireNoKeys(t *testing.T, c redis.UniversalClient, keys ...string) {
	t.Helper()
	for _, k := range keys {
		n, err := c.Exists(testkit.Ctx(t), k).Result()
		require.NoError(t, err)
		require.Zero(t, n, "key %s exists", k)
	}
}

// A host whose code names the default, Prefix: DefaultPrefix (a config default, the value it
// also gives ACLRule), had its limits under PreviousDefaultPrefix before v0.2.0, as the
// constant then was: Init must refuse for it as for a host that leaves Prefix empty.
func TestPrefixSetToDefaultPrefixAlsoRefusesALimitUnderThePreviousDefault(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, admin, name := testkit.Ctx(t), celebritytest.AdminOf(t, c), uniqueName()
		central := centralAt(t, admin, name)
		require.NoError(t, central(PreviousDefaultPrefix).Init(ctx))
		named := central(DefaultPrefix)
		require.ErrorIs(t, named.Init(ctx), ErrPreviousPrefix)
		requireNoKeys(t, admin, named.l.meta(), named.marker)

		pool := func(prefix string) *Pool {
			p, err := NewPool(admin, PoolOptions{Name: name, Capacity: 2, Prefix: prefix, Owners: []Owner{{Name: "eu", First: 1, Last: 2}},
				AllowWeakDurability: true, AllowSharedWitness: true})
			require.NoError(t, err)
			return p
		}
		require.NoError(t, pool(PreviousDefaultPrefix).Init(ctx))
		np := pool(DefaultPrefix)
		require.ErrorIs(t, np.Init(ctx), ErrPreviousPrefix)
		requireNoKeys(t, admin, np.ledgers["eu"].meta(), np.WitnessKey("eu"))
	})
}

// The repairs of a lost ledger create one: under the new default, for a limit whose ledger is
// not lost but under the previous default (Audit reports it missing, Acquire gets
// ErrLedgerMissing), Reconcile and RestoreLost must refuse as Init does, or an operator
// following the audit frees every permit again while the old holders still run.
func TestRepairsDoNotRecreateALimitThatExistsUnderThePreviousDefaultPrefix(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, admin, name := testkit.Ctx(t), celebritytest.AdminOf(t, c), uniqueName()
		old, err := NewCentral(admin, CentralOptions{Name: name, Capacity: 1, Prefix: PreviousDefaultPrefix, AllowWeakDurability: true})
		require.NoError(t, err)
		require.NoError(t, old.Init(ctx))
		_, err = old.Acquire(ctx, "job-1")
		require.NoError(t, err)
		upgraded, err := NewCentral(admin, CentralOptions{Name: name, Capacity: 1, AllowWeakDurability: true})
		require.NoError(t, err)
		_, err = upgraded.Acquire(ctx, "job-2")
		require.ErrorIs(t, err, ErrLedgerMissing)
		require.ErrorIs(t, upgraded.RestoreLost(ctx), ErrPreviousPrefix)
		requireNoKeys(t, admin, upgraded.l.meta(), upgraded.marker)

		opts := PoolOptions{Name: name, Capacity: 2, Owners: []Owner{{Name: "eu", First: 1, Last: 2}},
			AllowWeakDurability: true, AllowSharedWitness: true}
		o := opts
		o.Prefix = PreviousDefaultPrefix
		oldPool, err := NewPool(admin, o)
		require.NoError(t, err)
		require.NoError(t, oldPool.Init(ctx))
		_, err = oldPool.Acquire(ctx, "eu", "job-1")
		require.NoError(t, err)
		pool, err := NewPool(admin, opts)
		require.NoError(t, err)
		rep, err := pool.Audit(ctx)
		require.NoError(t, err)
		require.Equal(t, []int{1, 2}, rep.Missing, "the audit under the new default finds no ledger")
		require.ErrorIs(t, pool.Reconcile(ctx, "eu"), ErrPreviousPrefix)
		requireNoKeys(t, admin, pool.ledgers["eu"].meta(), pool.WitnessKey("eu"))
		require.ErrorIs(t, pool.Init(ctx), ErrPreviousPrefix, "and Init still refuses")
	})
}

// A host upgrading with least privilege keeps the Redis user it granted ACLRule before
// v0.2.0, "~escrow:*": Init under the default prefix is refused its first read, and the
// error says which prefix it read and which one the user holds.
func TestAUserOfThePreviousDefaultIsToldWhichPrefixItLacks(t *testing.T) {
	ctx, name := testkit.Ctx(t), uniqueName()
	const hint = `keys under "celebrity:escrow:", the default prefix since v0.2.0; a user granted ACLRule before has "escrow:"`
	for mode, user := range map[string]func(string, ...string) redis.UniversalClient{
		"standalone": func(n string, r ...string) redis.UniversalClient { return celebritytest.Standalone(t).User(t, n, r...) },
		"cluster": func(n string, r ...string) redis.UniversalClient {
			return celebritytest.SharedCluster(t).User(t, n, r...)
		},
	} {
		c := user("old-"+mode+name, ACLRule(PoolOptions{Prefix: PreviousDefaultPrefix})...)
		central, err := NewCentral(c, CentralOptions{Name: name, Capacity: 1, AllowWeakDurability: true})
		require.NoError(t, err)
		err = central.Init(ctx)
		require.ErrorContains(t, err, "NOPERM", mode)
		require.ErrorContains(t, err, hint, mode)
		pool, err := NewPool(c, PoolOptions{Name: name, Capacity: 1, Owners: []Owner{{Name: "eu", First: 1, Last: 1}},
			AllowWeakDurability: true, AllowSharedWitness: true})
		require.NoError(t, err)
		err = pool.Init(ctx)
		require.ErrorContains(t, err, "NOPERM", mode)
		require.ErrorContains(t, err, hint, mode)

		// A user granted only the new default's rule cannot look under the previous prefix:
		// the refusal of those keys reads as absent, and the limits are created.
		c = user("new-"+mode+name, ACLRule(PoolOptions{})...)
		central, err = NewCentral(c, CentralOptions{Name: name + "-" + mode, Capacity: 1, AllowWeakDurability: true})
		require.NoError(t, err)
		require.NoError(t, central.Init(ctx), mode)
		pool, err = NewPool(c, PoolOptions{Name: name + "-" + mode, Capacity: 1, Owners: []Owner{{Name: "eu", First: 1, Last: 1}},
			AllowWeakDurability: true, AllowSharedWitness: true})
		require.NoError(t, err)
		require.NoError(t, pool.Init(ctx), mode)
	}
}
