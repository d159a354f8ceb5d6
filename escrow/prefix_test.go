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

// uniqueName returns a limit name no other test uses: these tests run under the default
// prefixes, shared by every test of the server.
func uniqueName() string { return "seats-" + strconv.FormatUint(rand.Uint64(), 36) }

// A limit created before v0.2.0 lives under PreviousDefaultPrefix. A process of this version
// with the default prefix must not create it anew, with every permit free, while the old
// processes still grant from it; with Prefix set to the old default it uses the old ledger.
func TestCentralInitRefusesALimitThatExistsUnderThePreviousDefaultPrefix(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, admin, name := testkit.Ctx(t), celebritytest.AdminOf(t, c), uniqueName()
		at := func(prefix string) *Central {
			cl, err := NewCentral(admin, CentralOptions{Name: name, Capacity: 2, Prefix: prefix, AllowWeakDurability: true})
			require.NoError(t, err)
			return cl
		}
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

// requireNoKeys fails t if any of keys exists: a refused Init wrote nothing.
func requireNoKeys(t *testing.T, c redis.UniversalClient, keys ...string) {
	t.Helper()
	for _, k := range keys {
		n, err := c.Exists(testkit.Ctx(t), k).Result()
		require.NoError(t, err)
		require.Zero(t, n, "key %s exists", k)
	}
}
