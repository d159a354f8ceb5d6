package stripes

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// A counter created before v0.2.0 lives under PreviousDefaultPrefix. A process of this
// version with the default prefix must not start it again from zero under the new one (and
// count again a retry of an event the old counter has), through a Counter, a Family or the
// read tools; with Prefix set to the old default it keeps counting the old counter.
func TestACounterUnderThePreviousDefaultPrefixIsNotCreatedAgain(t *testing.T) {
	both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, admin := testkit.Ctx(t), celebritytest.AdminOf(t, c)
		name := "post:" + strconv.FormatUint(rand.Uint64(), 36) + ":views"
		at := func(prefix string) *Counter {
			cnt, err := New(admin, Options{Name: name, Prefix: prefix, Stripes: 1, SealInterval: -1})
			require.NoError(t, err)
			t.Cleanup(func() { _ = cnt.Close() })
			return cnt
		}
		ev := Event{ID: "view-1", Time: time.Now()}
		_, err := at(PreviousDefaultPrefix).Add(ctx, ev, 1)
		require.NoError(t, err)

		_, err = at("").Add(ctx, ev, 1)
		require.ErrorIs(t, err, ErrPreviousPrefix)
		require.ErrorContains(t, err, `set Options.Prefix to "stripes:" on every process`)
		_, err = at("").Sum(ctx)
		require.ErrorIs(t, err, ErrPreviousPrefix)
		fam, err := NewFamily(admin, FamilyOptions{Counter: Options{SealInterval: -1}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = fam.Close() })
		_, err = fam.Add(ctx, name, ev, 1)
		require.ErrorIs(t, err, ErrPreviousPrefix)
		_, err = ReadLayout(ctx, admin, "", name)
		require.ErrorIs(t, err, ErrNoCounter)
		require.ErrorIs(t, err, ErrPreviousPrefix)
		n, err := admin.Exists(ctx, keys{prefix: DefaultPrefix, name: name}.layout()).Result()
		require.NoError(t, err)
		require.Zero(t, n, "nothing was created under the new prefix")

		kept := at(PreviousDefaultPrefix) // the CHANGELOG's migration: the old prefix, set
		r, err := kept.Add(ctx, ev, 1)
		require.NoError(t, err)
		require.False(t, r.Applied, "the retry is found in the old counter's records")
		require.Equal(t, int64(1), mustSum(t, kept))

		fresh := "post:" + strconv.FormatUint(rand.Uint64(), 36) + ":views"
		_, err = fam.Add(ctx, fresh, ev, 1)
		require.NoError(t, err, "a name new to both prefixes is created under the default")
		s, err := fam.Sum(ctx, fresh)
		require.NoError(t, err)
		require.Equal(t, int64(1), s)
	})
}

// A host whose code names the default, Prefix: DefaultPrefix (a config default, the value
// it also gives ACLRule), had its counters under PreviousDefaultPrefix before v0.2.0, as the
// constant then was: after the upgrade it is under the new default as much as a host that
// leaves Prefix empty, and must not count a retry again in a new counter either.
func TestPrefixSetToDefaultPrefixAlsoRefusesACounterUnderThePreviousDefault(t *testing.T) {
	both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, admin := testkit.Ctx(t), celebritytest.AdminOf(t, c)
		name := "post:" + strconv.FormatUint(rand.Uint64(), 36) + ":views"
		ev := Event{ID: "view-1", Time: time.Now()}
		old, err := New(admin, Options{Name: name, Prefix: PreviousDefaultPrefix, Stripes: 1, SealInterval: -1})
		require.NoError(t, err)
		t.Cleanup(func() { _ = old.Close() })
		_, err = old.Add(ctx, ev, 1)
		require.NoError(t, err)

		for _, stripes := range []int{1, 4} {
			named, err := New(admin, Options{Name: name, Prefix: DefaultPrefix, Stripes: stripes, SealInterval: -1})
			require.NoError(t, err)
			t.Cleanup(func() { _ = named.Close() })
			_, err = named.Add(ctx, ev, 1)
			require.ErrorIs(t, err, ErrPreviousPrefix, "%d stripes", stripes)
		}
		fam, err := NewFamily(admin, FamilyOptions{Counter: Options{Prefix: DefaultPrefix, SealInterval: -1}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = fam.Close() })
		_, err = fam.Add(ctx, name, ev, 1)
		require.ErrorIs(t, err, ErrPreviousPrefix)
		n, err := admin.Exists(ctx, keys{prefix: DefaultPrefix, name: name}.layout()).Result()
		require.NoError(t, err)
		require.Zero(t, n, "nothing was created under the new prefix")
	})
}

// A host upgrading with least privilege keeps the Redis user it granted ACLRule before
// v0.2.0, "~stripes:*": a process that kept the default prefix is refused its first read,
// and the error says which prefix it read and which one the user holds.
func TestAUserOfThePreviousDefaultIsToldWhichPrefixItLacks(t *testing.T) {
	ctx, name := testkit.Ctx(t), "post:"+strconv.FormatUint(rand.Uint64(), 36)
	for mode, user := range map[string]func(string, ...string) Client{
		"standalone": func(n string, r ...string) Client { return celebritytest.Standalone(t).User(t, n, r...) },
		"cluster":    func(n string, r ...string) Client { return celebritytest.SharedCluster(t).User(t, n, r...) },
	} {
		c := user("old-"+mode+name, ACLRule(Options{Prefix: PreviousDefaultPrefix})...)
		cnt, err := New(c, Options{Name: name, Stripes: 1, SealInterval: -1})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cnt.Close() })
		_, err = cnt.Add(ctx, Event{ID: "view-1", Time: time.Now()}, 1)
		require.ErrorContains(t, err, "NOPERM", mode)
		require.ErrorContains(t, err, `keys under "celebrity:stripes:", the default prefix since v0.2.0; a user granted ACLRule before has "stripes:"`, mode)

		// A user granted only the new default's rule cannot look under the previous prefix:
		// the refusal of that key reads as absent, and the counter is created.
		c = user("new-"+mode+name, ACLRule(Options{})...)
		fresh, err := New(c, Options{Name: name + ":" + mode, Stripes: 1, SealInterval: -1})
		require.NoError(t, err)
		t.Cleanup(func() { _ = fresh.Close() })
		_, err = fresh.Add(ctx, Event{ID: "view-1", Time: time.Now()}, 1)
		require.NoError(t, err, mode)
	}
}
