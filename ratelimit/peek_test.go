package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

// peekDeployments runs fn on the shared standalone server and on the shared cluster.
func peekDeployments(t *testing.T, fn func(t *testing.T, c redis.UniversalClient)) {
	t.Run("standalone", func(t *testing.T) { fn(t, celebritytest.Standalone(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { fn(t, celebritytest.SharedCluster(t).Client(t)) })
}

// TestPeekReportsUseWithoutAdmitting: Peek sees what Allow counted, in every mode, and
// taking a look admits nothing (the whole limit is still there to take afterwards).
func TestPeekReportsUseWithoutAdmitting(t *testing.T) {
	peekDeployments(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := t.Context()
		t.Run("exact sliding", func(t *testing.T) {
			l := newLimiter(t, c, Options{Limit: Limit{Rate: 10, Period: 10 * time.Minute}, Window: Sliding})
			u, err := l.Peek(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, Usage{Used: 0, Remaining: 10, Slots: []SlotUsage{{Slot: 0, Key: u.Slots[0].Key, Budget: 10}}}, u)
			r, err := l.AllowN(ctx, "k", 3)
			require.NoError(t, err)
			require.True(t, r.Allowed)
			for range 3 {
				u, err = l.Peek(ctx, "k")
				require.NoError(t, err)
				require.Equal(t, int64(3), u.Used)
				require.Equal(t, int64(7), u.Remaining)
				require.Positive(t, u.ResetAfter)
				require.LessOrEqual(t, u.ResetAfter, 11*time.Minute)
				require.Len(t, u.Slots, 1)
				require.Equal(t, int64(3), u.Slots[0].Used)
				require.True(t, strings.HasPrefix(u.Slots[0].Key, l.o.Prefix), u.Slots[0].Key)
			}
			r, err = l.AllowN(ctx, "k", 7)
			require.NoError(t, err)
			require.True(t, r.Allowed, "peeking took nothing")
			r, err = l.Allow(ctx, "k")
			require.NoError(t, err)
			require.False(t, r.Allowed)
			u, err = l.Peek(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, int64(10), u.Used)
			require.Zero(t, u.Remaining)
		})
		t.Run("gcra", func(t *testing.T) {
			l := newLimiter(t, c, Options{Limit: Limit{Rate: 10, Period: 10 * time.Minute}})
			u, err := l.Peek(ctx, "g")
			require.NoError(t, err)
			require.Equal(t, Usage{Used: 0, Remaining: 10}, u)
			r, err := l.AllowN(ctx, "g", 4)
			require.NoError(t, err)
			require.True(t, r.Allowed)
			u, err = l.Peek(ctx, "g")
			require.NoError(t, err)
			require.Equal(t, int64(4), u.Used, "one cell is back only after a minute")
			require.Equal(t, int64(6), u.Remaining)
			require.Positive(t, u.ResetAfter)
			require.LessOrEqual(t, u.ResetAfter, 4*time.Minute)
			require.Nil(t, u.Slots)
			r, err = l.AllowN(ctx, "g", 6)
			require.NoError(t, err)
			require.True(t, r.Allowed, "peeking took nothing")
		})
		t.Run("leased", func(t *testing.T) {
			l := newLimiter(t, c, Options{Limit: Limit{Rate: 30, Period: 10 * time.Minute}, Mode: Leased, Slots: 3})
			r, err := l.Allow(ctx, "l")
			require.NoError(t, err)
			require.True(t, r.Allowed)
			u, err := l.Peek(ctx, "l")
			require.NoError(t, err)
			require.Len(t, u.Slots, 3)
			var used, budget int64
			for j, s := range u.Slots {
				require.Equal(t, j, s.Slot)
				used += s.Used
				budget += s.Budget
			}
			require.Equal(t, int64(30), budget)
			require.Equal(t, u.Used, used)
			require.GreaterOrEqual(t, u.Used, int64(1), "the chunk granted to this instance is counted")
			require.Equal(t, 30-u.Used, u.Remaining)
		})
		t.Run("approximate", func(t *testing.T) {
			l := newLimiter(t, c, Options{Limit: Limit{Rate: 50, Period: 10 * time.Minute}, Mode: Approximate})
			u, err := l.Peek(ctx, "a")
			require.NoError(t, err)
			require.Equal(t, Usage{Used: 0, Remaining: 50}, u)
			s := newLimiter(t, c, Options{Limit: Limit{Rate: 50, Period: 10 * time.Minute}, Mode: Approximate,
				MaxUnsynced: 1, Prefix: l.o.Prefix})
			for range 5 {
				r, err := s.Allow(ctx, "a")
				require.NoError(t, err)
				require.True(t, r.Allowed)
			}
			// Each admission forces a sync: what reached Redis shows, and nothing more.
			require.Eventually(t, func() bool {
				u, err := l.Peek(ctx, "a")
				return err == nil && u.Used >= 4
			}, 30*time.Second, 10*time.Millisecond)
			u, err = l.Peek(ctx, "a")
			require.NoError(t, err)
			require.LessOrEqual(t, u.Used, int64(5))
			require.Equal(t, 50-u.Used, u.Remaining)
			require.Nil(t, u.Slots)
		})
	})
}

// TestPeekRefusesBadKeyAndClosed: a bad key wraps ErrInvalid; a closed Limiter says so.
func TestPeekRefusesBadKeyAndClosed(t *testing.T) {
	l := newLimiter(t, celebritytest.Standalone(t).Client(t), Options{Limit: Limit{Rate: 10, Period: time.Minute}})
	_, err := l.Peek(t.Context(), "")
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, GCRA, l.Options().Window, "the default window of Exact mode")
	require.Equal(t, int64(10), l.Options().Limit.Burst, "the default burst is the rate")
	_, err = l.Peek(t.Context(), strings.Repeat("x", DefaultMaxKeyBytes+1))
	require.ErrorIs(t, err, ErrInvalid)
	require.NoError(t, l.Close())
	_, err = l.Peek(t.Context(), "k")
	require.ErrorIs(t, err, ErrClosed)
}
