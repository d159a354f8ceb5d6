package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

// sweepKeys are limit keys a mangling or ambiguous key layout would merge: "a:b" and "a_b",
// "{x}" and "x", "\xff\xfe" and "\ufffd", "a\x00b" and "a", and keys that extend another's
// physical key with the suffixes the scripts add ("x" and "x:0", "x:s", "x:0:1").
var sweepKeys = []string{"\xff\xfe", "\ufffd", "a\x00b", "a", "a:b", "a_b", ":", "{", "}", "{x}", "x",
	"x:0", "x:s", "x:0:1"}

// TestOddKeysHaveTheirOwnLimits: in every mode that decides on the server, spending a key's
// whole limit leaves every other sweep key its full limit; an empty or 1 MiB key is refused
// with ErrInvalid naming the key, and nothing is written.
func TestOddKeysHaveTheirOwnLimits(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		lim := Limit{Rate: 2, Period: time.Minute}
		for _, o := range []Options{
			{Limit: lim, Mode: Exact, Window: GCRA},
			{Limit: lim, Mode: Exact, Window: Sliding, Slots: 1},
			{Limit: lim, Mode: Leased, Slots: 1},
		} {
			p := celebritytest.NewPrefix(t)
			o.Prefix = p
			l := newLimiter(t, c, o)
			ctx := t.Context()
			for _, k := range sweepKeys {
				r, err := l.AllowN(ctx, k, 2)
				require.NoError(t, err, "%v key %q", o.Mode, k)
				require.True(t, r.Allowed, "%v %v key %q has its own limit", o.Mode, o.Window, k)
				r, err = l.Allow(ctx, k)
				require.NoError(t, err, "%v key %q", o.Mode, k)
				require.False(t, r.Allowed, "%v %v key %q is spent", o.Mode, o.Window, k)
			}
			n := countKeys(t, c, p)
			for _, k := range []string{"", strings.Repeat("k", 1<<20)} {
				_, err := l.Allow(ctx, k)
				require.ErrorIs(t, err, ErrInvalid)
				require.ErrorContains(t, err, "key must be 1..512 bytes")
				_, err = l.Peek(ctx, k)
				require.ErrorIs(t, err, ErrInvalid)
				require.ErrorContains(t, err, "key must be 1..512 bytes")
			}
			require.Equal(t, n, countKeys(t, c, p), "a refused key writes nothing")
		}
	})
}
