package routing_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

func TestShardRejectsBadInput(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	ctx := testkit.Ctx(t)
	s := newShard(t, "a", c, prefix(t), routing.ShardOptions{})
	u := routing.BucketUnit(0)
	cases := map[string]error{}
	_, cases["empty tenant"] = s.Exec(ctx, u, 1, "", "op", routing.Put("k", "v"))
	_, cases["empty op ID"] = s.Exec(ctx, u, 1, "t", "", routing.Put("k", "v"))
	_, cases["generation 0"] = s.Exec(ctx, u, 0, "t", "op", routing.Put("k", "v"))
	_, cases["empty key"] = s.Exec(ctx, u, 1, "t", "op", routing.Put("", "v"))
	_, cases["bad kind"] = s.Exec(ctx, u, 1, "t", "op", routing.Op{Key: "k"})
	_, cases["bad unit"] = s.Exec(ctx, routing.Unit{}, 1, "t", "op", routing.Put("k", "v"))
	_, cases["foreign tenant"] = s.Exec(ctx, routing.TenantUnit("x"), 1, "t", "op", routing.Put("k", "v"))
	_, cases["bad state"] = s.Transition(ctx, u, routing.Ownership{}, routing.Ownership{Generation: 1, State: "op en"})
	for name, err := range cases {
		require.ErrorIs(t, err, routing.ErrInvalid, name)
	}
	for _, o := range []routing.ShardOptions{{Prefix: "a{b"}, {OpRetention: -time.Second}, {LogMaxLen: -2}} {
		_, err := routing.NewShard("a", c, o)
		require.Error(t, err)
	}
	_, err := routing.NewShard("", c, routing.ShardOptions{})
	require.Error(t, err)
	require.False(t, errors.Is(err, routing.ErrStaleRoute))
}

// The write script checks every argument itself, before its first write.
func TestWriteScriptValidatesArgumentsBeforeWriting(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		s := newShard(t, "a", c, prefix(t), routing.ShardOptions{})
		u := routing.BucketUnit(3)
		open(t, s, u, 1)
		k := routingfmt.Keys(s.Keys().Tag(u))
		keys := []string{k.Own, k.Records, k.Ops, k.OpExpiry, k.Tombstones, k.Log}
		good := []any{"1", "t", "op", "fp", "put", "1:tk", "0", "0", "v", "1000", "60000", "60000", "0"}
		bad := map[string]func([]any) []any{
			"gen":      func(a []any) []any { a[0] = "x"; return a },
			"gen 0":    func(a []any) []any { a[0] = "0"; return a },
			"tenant":   func(a []any) []any { a[1] = ""; return a },
			"op ID":    func(a []any) []any { a[2] = ""; return a },
			"fp colon": func(a []any) []any { a[3] = "a:b"; return a },
			"kind":     func(a []any) []any { a[4] = "incr"; return a },
			"field":    func(a []any) []any { a[5] = ""; return a },
			"check":    func(a []any) []any { a[6] = "2"; return a },
			"expect":   func(a []any) []any { a[7] = "-1"; return a },
			"now":      func(a []any) []any { a[9] = "soon"; return a },
			"opttl":    func(a []any) []any { a[10] = "0"; return a },
			"logmax":   func(a []any) []any { a[12] = "~"; return a },
			"missing":  func(a []any) []any { return a[:12] },
		}
		for name, breakIt := range bad {
			args := breakIt(append([]any(nil), good...))
			err := routing.WriteScript.Run(ctx, c, keys, args...).Err()
			require.ErrorContains(t, err, "routing write", name)
		}
		for _, key := range keys[1:] {
			n, err := c.Exists(ctx, key).Result()
			require.NoError(t, err)
			require.Zero(t, n, "%s written by a rejected call", key)
		}
		require.NoError(t, routing.WriteScript.Run(ctx, c, keys, good...).Err(), "the well-formed call works")
	})
}
