package ratelimit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

type fakeHot struct{ hot []string }

func (f *fakeHot) Observe(string) {}
func (f *fakeHot) Hot() []string  { return f.hot }

func TestNewRefusesBadOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	sec := Limit{Rate: 100, Period: time.Second}
	cases := []struct {
		name  string
		o     Options
		field string
	}{
		{"zero rate", Options{Limit: Limit{Period: time.Second}}, "Options.Limit.Rate must be 1.."},
		{"negative rate", Options{Limit: Limit{Rate: -5, Period: time.Second}}, "Options.Limit.Rate must be 1.."},
		{"zero window", Options{Limit: Limit{Rate: 10}}, "Options.Limit.Period must be 1ms..24h0m0s"},
		{"negative window", Options{Limit: Limit{Rate: 10, Period: -time.Second}}, "Options.Limit.Period"},
		{"sub-millisecond window", Options{Limit: Limit{Rate: 10, Period: 1500 * time.Microsecond}}, "whole number of milliseconds"},
		{"burst above limit", Options{Limit: Limit{Rate: 10, Period: time.Second, Burst: 11}}, "Options.Limit.Burst must be 0..Rate (10), got 11"},
		{"burst outside GCRA", Options{Limit: Limit{Rate: 10, Period: time.Second, Burst: 5}, Mode: Leased}, "Burst is used by GCRA only"},
		{"unknown mode", Options{Limit: sec, Mode: 7}, "Options.Mode"},
		{"GCRA leased", Options{Limit: sec, Mode: Leased, Window: GCRA}, "Window GCRA needs Mode Exact"},
		{"hot keys without leasing", Options{Limit: sec, HotKeys: &fakeHot{}}, "Options.HotKeys needs Mode Leased"},
		{"sub-windows not dividing", Options{Limit: Limit{Rate: 10, Period: 1001 * time.Millisecond}, Mode: Leased}, "divisible by Options.SubWindows"},
		{"one sub-window", Options{Limit: sec, Mode: Leased, SubWindows: 1}, "Options.SubWindows must be 2..1000"},
		{"slots above rate", Options{Limit: Limit{Rate: 2, Period: time.Second}, Mode: Leased, Slots: 3}, "Options.Slots must be 1..256 and at most Limit.Rate (2)"},
		{"chunk above share", Options{Limit: sec, Mode: Leased, MaxChunk: 34}, "Options.MaxChunk must be 1..33"},
		{"sync beyond period", Options{Limit: sec, Mode: Approximate, SyncInterval: 2 * time.Second}, "Options.SyncInterval"},
		{"unsynced above rate", Options{Limit: sec, Mode: Approximate, MaxUnsynced: 101}, "Options.MaxUnsynced"},
		{"braces in prefix", Options{Limit: sec, Prefix: "a{b}"}, "Options.Prefix"},
		{"attempts", Options{Limit: sec, Attempts: 11}, "Options.Attempts must be 1..10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(rdb, tc.o)
			require.Nil(t, l)
			require.ErrorIs(t, err, ErrInvalid)
			require.Contains(t, err.Error(), tc.field)
		})
	}
	_, err := New(nil, Options{Limit: sec})
	require.ErrorIs(t, err, ErrInvalid)
}

// Bad keys and costs are refused before any I/O: nothing is admitted and nothing written.
func TestAllowRefusesBadInputWithoutWriting(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		for _, mode := range []Mode{Exact, Leased, Approximate} {
			t.Run(mode.String(), func(t *testing.T) {
				prefix := celebritytest.NewPrefix(t)
				l := newLimiter(t, c, Options{Limit: Limit{Rate: 30, Period: time.Second}, Mode: mode, Prefix: prefix, MaxKeyBytes: 64})
				ctx := t.Context()
				for _, tc := range []struct {
					key  string
					n    int64
					want string
				}{
					{"", 1, "key must be 1..64 bytes, got 0"},
					{strings.Repeat("k", 65), 1, "key must be 1..64 bytes, got 65"},
					{"k", 0, "cost must be 1.."},
					{"k", -1, "cost must be 1.."},
					{"k", 31, "cost must be 1.."},
				} {
					res, err := l.AllowN(ctx, tc.key, tc.n)
					require.ErrorIs(t, err, ErrInvalid)
					require.Contains(t, err.Error(), tc.want)
					require.False(t, res.Allowed)
				}
				require.Zero(t, countKeys(t, c, prefix))
				require.Zero(t, l.Stats().Calls)
			})
		}
	})
}

// Keys are stored verbatim behind the package's own hash tag: ':' and braces and bytes
// that are not UTF-8 neither merge two limits nor break a script's single slot.
func TestOddKeysAreDistinctLimits(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		for _, mode := range []Mode{Exact, Leased, Approximate} {
			t.Run(mode.String(), func(t *testing.T) {
				l := newLimiter(t, c, Options{Limit: Limit{Rate: 3, Period: time.Minute}, Mode: mode, Slots: 1, SubWindows: 2})
				ctx := t.Context()
				keys := []string{"a:1", "a", "a:1:0", "{a}", "}x{", "{}", "\xff\xfe", "a}:l:b"}
				for _, k := range keys {
					for i := range 3 {
						res, err := l.Allow(ctx, k)
						require.NoError(t, err, "key %q", k)
						require.True(t, res.Allowed, "key %q request %d", k, i)
					}
					res, err := l.Allow(ctx, k)
					require.NoError(t, err)
					require.False(t, res.Allowed, "key %q must be at its limit", k)
				}
			})
		}
	})
}

func TestClosedLimiterRefuses(t *testing.T) {
	l := newLimiter(t, celebritytest.Standalone(t).Client(t), Options{Limit: Limit{Rate: 3, Period: time.Second}, Mode: Leased})
	require.NoError(t, l.Close())
	require.NoError(t, l.Close())
	_, err := l.Allow(t.Context(), "k")
	require.True(t, errors.Is(err, ErrClosed))
}

// countKeys counts the keys under prefix on every master behind c.
func countKeys(t testing.TB, c redis.UniversalClient, prefix string) int {
	t.Helper()
	ctx := context.Background()
	c = celebritytest.AdminOf(t, c) // KEYS is not in the package's rule
	if cc, ok := c.(*redis.ClusterClient); ok {
		n := 0
		var mu = make(chan struct{}, 1)
		require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			keys, err := m.Keys(ctx, prefix+"*").Result()
			mu <- struct{}{}
			n += len(keys)
			<-mu
			return err
		}))
		return n
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	return len(keys)
}
