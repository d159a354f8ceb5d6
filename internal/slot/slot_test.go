package slot_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/slot"
)

func TestMain(m *testing.M) { celebritytest.Main(m) }

func TestKnownSlots(t *testing.T) {
	// Values from the Redis Cluster specification and its examples.
	require.Equal(t, uint16(12739), slot.Of("123456789")) // CRC16/XMODEM check value 0x31C3
	require.Equal(t, slot.Of("user1000"), slot.Of("{user1000}.following"))
	require.Equal(t, slot.Of("{}foo"), slot.Of("{}foo"))
	require.Equal(t, "bar", slot.Tag("foo{bar}{zap}"))
	require.Equal(t, "{}foo", slot.Tag("{}foo"))
	require.Equal(t, "foo{", slot.Tag("foo{"))
	require.Equal(t, "", slot.Tag(""))
}

// keys returns random keys, many with braces in awkward places.
func keys(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	parts := []string{"{", "}", "{}", "a", "user", "{tag}", "ü", "日本", ":", "}{", "x{y", "0"}
	out := []string{"", "{", "}", "{}", "{{}}", "{}{x}", "{x}{}", "a{b}c{d}", "{{x}}", "}{x}"}
	for len(out) < n {
		var b strings.Builder
		for range 1 + r.IntN(6) {
			if r.IntN(3) == 0 {
				b.WriteString(parts[r.IntN(len(parts))])
			} else {
				b.WriteByte(byte(32 + r.IntN(95)))
			}
		}
		out = append(out, b.String())
	}
	return out
}

func TestOfMatchesClusterKeyslot(t *testing.T) {
	t.Parallel()
	c := celebritytest.SharedCluster(t).Client(t)
	ctx := context.Background()
	ks := keys(5000)
	node := celebritytest.SharedCluster(t).Masters()[0].Client(t)
	pipe := node.Pipeline()
	for _, k := range ks {
		pipe.ClusterKeySlot(ctx, k)
	}
	cmds, err := pipe.Exec(ctx)
	require.NoError(t, err)
	for i, k := range ks {
		got, err := cmds[i].(interface{ Result() (int64, error) }).Result()
		require.NoError(t, err)
		require.Equal(t, uint16(got), slot.Of(k), "key %q", k)
	}
	require.NoError(t, c.Ping(ctx).Err())
}

func TestTagForCoversEverySlot(t *testing.T) {
	for s := range uint16(slot.Count) {
		tag := slot.TagFor(s)
		require.NotEmpty(t, tag)
		require.Equal(t, s, slot.Of("{"+tag+"}rest"), "tag %q", tag)
	}
}

func TestMapAgreesWithCluster(t *testing.T) {
	t.Parallel()
	cl := celebritytest.SharedCluster(t)
	ctx := context.Background()
	m, err := slot.Load(ctx, cl.Client(t))
	require.NoError(t, err)
	require.ElementsMatch(t, cl.Addrs(), m.Masters())
	total := 0
	for _, addr := range m.Masters() {
		owned := m.Slots(addr)
		total += len(owned)
		// Every owner answers for its slots: a key tagged into its first slot is written there.
		key := celebritytest.NewPrefix(t) + "{" + slot.TagFor(owned[0]) + "}k"
		require.Equal(t, addr, m.MasterOfKey(key))
		require.NoError(t, cl.Client(t).Set(ctx, key, 1, 0).Err())
		for _, s := range cl.Masters() {
			want := int64(0)
			if s.Addr() == addr {
				want = 1
			}
			require.Equal(t, want, s.Client(t).Exists(ctx, key).Val(), "key %s on %s", key, s.Addr())
		}
	}
	require.Equal(t, slot.Count, total)
}
