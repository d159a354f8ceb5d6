package celebrity_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// sweepKeys are keys a mangling encoder would break or merge ("\xff\xfe" and "\ufffd",
// "a\x00b" and "a", "a:b" and "a_b", "{x}" and "x"); each must stay its own key.
var sweepKeys = []string{"\xff\xfe", "\ufffd", "a\x00b", "a", "a:b", "a_b", "{", "}", "{x}", "x", "a|1|2|3:b\n"}

// TestOddKeysRoundTripThroughTheFleet writes and promotes each key on one instance and reads
// it back on another whose source knows nothing: each key's own value comes back from Redis,
// the other instance applies exactly the promoted keys, and ReadHotSet lists them unchanged.
func TestOddKeysRoundTripThroughTheFleet(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		ctx := t.Context()
		p := celebritytest.NewPrefix(t)
		a := newCache(t, d.client(t), newSource(), p, celebrity.Options[string]{
			Loop: celebrity.LoopOptions{ReportInterval: 100 * time.Millisecond}})
		b := newCache(t, d.client(t), newSource(), p, celebrity.Options[string]{
			Loop: celebrity.LoopOptions{ReportInterval: 100 * time.Millisecond}})
		for i, k := range sweepKeys {
			require.NoError(t, a.Set(ctx, k, strconvU(uint64(i)), 1), "key %q", k)
			require.NoError(t, a.Promote(ctx, k), "key %q", k)
		}
		want := slices.Sorted(slices.Values(sweepKeys))
		require.Eventually(t, func() bool { return slices.Equal(b.Hot(), want) }, 10*time.Second, 10*time.Millisecond, "a.Hot %q b.Hot %q", a.Hot(), b.Hot())
		for i, k := range sweepKeys {
			v, err := b.Get(ctx, k)
			require.NoError(t, err, "key %q", k)
			require.Equal(t, strconvU(uint64(i)), v, "key %q", k)
		}
		hs, err := celebrity.ReadHotSet(ctx, d.client(t), p)
		require.NoError(t, err)
		var got []string
		for _, m := range hs.Members {
			got = append(got, m.Key)
		}
		require.ElementsMatch(t, sweepKeys, got)
	})
}

// TestHugeKeyRefusedWithoutWrite: a 1 MiB key (over MaxKeyLen) is refused by every entry
// point with an error naming the key and its limit, and nothing is written.
func TestHugeKeyRefusedWithoutWrite(t *testing.T) {
	srv := celebritytest.Standalone(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	p := celebritytest.NewPrefix(t)
	c := newCache(t, rdb, newSource(), p, celebrity.Options[string]{})
	admin := celebritytest.AdminOf(t, rdb)
	before, err := admin.DBSize(ctx).Result()
	require.NoError(t, err)
	for _, k := range []string{"", strings.Repeat("m", 1<<20)} {
		_, gerr := c.Get(ctx, k)
		for name, err := range map[string]error{"Get": gerr, "Set": c.Set(ctx, k, "v", 1),
			"Delete": c.Delete(ctx, k, 1), "Promote": c.Promote(ctx, k), "Demote": c.Demote(ctx, k)} {
			require.ErrorIs(t, err, celebrity.ErrInvalid, "%s(%d bytes)", name, len(k))
			require.ErrorContains(t, err, "key must", "%s(%d bytes)", name, len(k))
		}
	}
	after, err := admin.DBSize(ctx).Result()
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused call writes nothing")
	require.Empty(t, c.Hot())
}
