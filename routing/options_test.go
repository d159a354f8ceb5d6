package routing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// TestOptionErrorsWrapErrInvalidAndNameTheField checks every option New, NewShard and
// NewStore refuse: the error wraps ErrInvalid (and its former name) and names the field.
func TestOptionErrorsWrapErrInvalidAndNameTheField(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	shards := map[string]routing.ShardClient{"a": c}
	for name, tc := range map[string]struct {
		o    routing.Options
		want string
	}{
		"no shards":     {routing.Options{}, "Options.Shards must name at least one shard"},
		"prefix":        {routing.Options{Shards: shards, Prefix: "a{b}"}, "Options.Prefix must not contain braces"},
		"redirects":     {routing.Options{Shards: shards, MaxRedirects: 101}, "Options.MaxRedirects must be -1..100, got 101"},
		"poll":          {routing.Options{Shards: shards, PollInterval: -time.Second}, "Options.PollInterval must be >= 1ms"},
		"await":         {routing.Options{Shards: shards, AwaitTimeout: time.Microsecond}, "Options.AwaitTimeout must be >= 1ms"},
		"shard log cap": {routing.Options{Shards: shards, Shard: routing.ShardOptions{LogMaxLen: -3}}, "ShardOptions.LogMaxLen must be -1 or >= 1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := routing.New(c, tc.o)
			require.ErrorIs(t, err, routing.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := routing.NewShard("a", c, routing.ShardOptions{TombstoneRetention: -time.Second})
	require.ErrorIs(t, err, routing.ErrInvalid)
	require.ErrorContains(t, err, "ShardOptions.TombstoneRetention must be >= 1ms")
	_, err = routing.NewShard("", c, routing.ShardOptions{})
	require.ErrorIs(t, err, routing.ErrInvalid)
	_, err = routing.NewStore(nil, routing.StoreOptions{})
	require.ErrorIs(t, err, routing.ErrInvalid)
	_, err = routing.NewStore(c, routing.StoreOptions{Prefix: "}"})
	require.ErrorIs(t, err, routing.ErrInvalid)
}

// TestShardClockSetsRetention checks that ShardOptions.Clock is the time a tombstone's
// expiry counts from.
func TestShardClockSetsRetention(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	at := time.UnixMilli(1_000_000_000)
	clock := func() time.Time { return at }
	for name, o := range map[string]routing.ShardOptions{
		"clock": {Clock: clock, TombstoneRetention: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			s := newShard(t, "a", c, prefix(t)+name, o)
			u := routing.BucketUnit(1)
			open(t, s, u, 1)
			_, err := s.Exec(testkit.Ctx(t), u, 1, "acme", "op-1", routing.Put("k", "v"))
			require.NoError(t, err)
			_, err = s.Exec(testkit.Ctx(t), u, 1, "acme", "op-2", routing.Delete("k"))
			require.NoError(t, err)
			score, err := celebritytest.AdminOf(t, c).ZScore(testkit.Ctx(t), routingfmt.Keys(s.Keys().Tag(u)).Tombstones, routingfmt.RecordField("acme", "k")).Result()
			require.NoError(t, err)
			require.Equal(t, float64(at.Add(time.Minute).UnixMilli()), score)
		})
	}
}
