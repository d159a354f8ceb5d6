package l1cache

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/stretchr/testify/require"
)

func TestNewRejectsBadOptions(t *testing.T) {
	load := func(context.Context, string) (int, error) { return 0, nil }
	size := func(string, int) uint32 { return 1 }
	cases := []struct {
		name string
		o    Options[int]
		want string
	}{
		{"no capacity", Options[int]{}, "Options.MaxEntries must be 1..2147483647 (or set MaxCost), got 0"},
		{"negative capacity", Options[int]{MaxEntries: -1}, "Options.MaxEntries must be 1..2147483647, got -1"},
		{"both capacities", Options[int]{MaxEntries: 1, MaxCost: 1, Sizer: size}, "set one of Options.MaxEntries and Options.MaxCost"},
		{"cost without sizer", Options[int]{MaxCost: 10}, "Options.MaxCost requires Options.Sizer"},
		{"sizer without cost", Options[int]{MaxEntries: 1, Sizer: size}, "Options.Sizer requires Options.MaxCost"},
		{"negative fresh", Options[int]{MaxEntries: 1, Fresh: -time.Second}, "Options.Fresh must be 1ns..24h0m0s, got -1s"},
		{"negative stale", Options[int]{MaxEntries: 1, Stale: -1}, "Options.Stale must be 0s..24h0m0s, got -1ns"},
		{"negative stale-if-error", Options[int]{MaxEntries: 1, StaleIfError: -1}, "Options.StaleIfError must be 0s..24h0m0s"},
		{"error ttl forever", Options[int]{MaxEntries: 1, ErrorTTL: time.Hour}, "Options.ErrorTTL must be 1ns..1m0s, got 1h0m0s"},
		{"negative negative ttl", Options[int]{MaxEntries: 1, NegativeTTL: -1}, "Options.NegativeTTL must be 1ns..24h0m0s"},
		{"negative load timeout", Options[int]{MaxEntries: 1, LoadTimeout: -1}, "Options.LoadTimeout must be 1ns..24h0m0s"},
		{"negative beta", Options[int]{MaxEntries: 1, Beta: -0.5}, "Options.Beta must be 0..100, got -0.5"},
		{"nan beta", Options[int]{MaxEntries: 1, Beta: math.NaN()}, "Options.Beta must be 0..100, got NaN"},
		{"jitter too wide", Options[int]{MaxEntries: 1, Jitter: 0.9}, "Options.Jitter must be 0..0.5, got 0.9"},
		{"negative jitter", Options[int]{MaxEntries: 1, Jitter: -0.1}, "Options.Jitter must be 0..0.5, got -0.1"},
		{"negative refreshes", Options[int]{MaxEntries: 1, MaxRefreshes: -1}, "Options.MaxRefreshes must be 1..1048576, got -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(load, tc.o)
			require.Nil(t, c)
			require.ErrorContains(t, err, "l1cache: ")
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("nil loader", func(t *testing.T) {
		_, err := New[int](nil, Options[int]{MaxEntries: 1})
		require.EqualError(t, err, "l1cache: loader must not be nil")
	})
}

func TestNewAppliesDefaults(t *testing.T) {
	c := newCache(t, func(context.Context, string) (int, error) { return 1, nil }, Options[int]{MaxEntries: 1})
	require.Equal(t, int64(DefaultFresh), c.cfg.fresh)
	require.Equal(t, int64(0), c.cfg.stale)
	require.Equal(t, int64(DefaultErrorTTL), c.cfg.errTTL)
	require.Equal(t, int64(DefaultFresh), c.cfg.negTTL)
	require.Equal(t, int64(DefaultLoadTimeout), c.cfg.loadTimeout)
	require.Equal(t, DefaultJitter, c.cfg.Jitter)
	require.Equal(t, DefaultMaxRefreshes, c.cfg.MaxRefreshes)
	require.Zero(t, c.cfg.Beta)

	noJitter := newCache(t, func(context.Context, string) (int, error) { return 1, nil }, Options[int]{MaxEntries: 1, NoJitter: true, Jitter: 0.3})
	require.Zero(t, noJitter.cfg.Jitter)
}

// TestBadInputMatchesErrInvalid checks that every refusal of bad input matches ErrInvalid, so
// that a caller can tell it from a failure of Redis or of the store.
func TestBadInputMatchesErrInvalid(t *testing.T) {
	load := func(context.Context, string) (int, error) { return 0, nil }
	for _, o := range []Options[int]{
		{},
		{MaxEntries: 1, MaxCost: 1},
		{MaxEntries: 1, Fresh: -1},
		{MaxEntries: 1, ErrorTTL: time.Hour},
		{MaxEntries: 1, Jitter: 0.9},
		{MaxEntries: 1, Beta: math.Inf(1)},
		{MaxEntries: 1, MaxRefreshes: -1},
	} {
		_, err := New(load, o)
		require.ErrorIs(t, err, ErrInvalid, "%+v", o)
	}
	_, err := New[int](nil, Options[int]{MaxEntries: 1})
	require.ErrorIs(t, err, ErrInvalid)
	require.NotErrorIs(t, ErrInvalid, ErrClosed)

	srv := celebritytest.Standalone(t)
	c := newCache(t, newSource().load, Options[string]{})
	for _, o := range []InvalidatorOptions{
		{Channel: strings.Repeat("c", maxChannel+1)},
		{InstanceID: "a:b"},
		{PingInterval: time.Hour},
		{OfflineFresh: 48 * time.Hour},
		{PubSub: PubSubSharded + 1},
	} {
		_, err := NewInvalidator(srv.Client(t), c, o)
		require.ErrorIs(t, err, ErrInvalid, "%+v", o)
	}
	_, err = NewInvalidator(nil, c, InvalidatorOptions{})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = NewInvalidator(srv.Client(t), nil, InvalidatorOptions{})
	require.ErrorIs(t, err, ErrInvalid)
}
