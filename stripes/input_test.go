package stripes

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestBadOptionsNameTheField(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Name: "v"}, "stripes: invalid argument: Options.Stripes must be 1..4096, got 0"},
		{Options{Name: "v", Stripes: 5000}, "Options.Stripes must be 1..4096, got 5000"},
		{Options{Stripes: 4}, "Options.Name must be 1..128 bytes, got 0"},
		{Options{Name: "a{b}", Stripes: 4}, "Options.Name must not contain"},
		{Options{Name: "v", Prefix: "p{", Stripes: 4}, "Options.Prefix must not contain"},
		{Options{Name: "v", Stripes: 4, DedupWindow: time.Millisecond}, "Options.DedupWindow must be 100ms..168h0m0s, got 1ms"},
		{Options{Name: "v", Stripes: 4, DedupSlices: 2000}, "Options.DedupSlices must be 1..1024, got 2000"},
		{Options{Name: "v", Stripes: 4, DedupBits: 32}, "Options.DedupBits must be 31 or 63, got 32"},
		{Options{Name: "v", Stripes: 4, SetMembers: 1}, "Options.SetMembers must be 2..4096, got 1"},
		{Options{Name: "v", Stripes: 4, MaxIDBytes: -1}, "Options.MaxIDBytes must be 1..65536, got -1"},
	} {
		_, err := New(rc, tc.o)
		require.ErrorIs(t, err, ErrInvalid)
		require.Contains(t, err.Error(), tc.want)
	}
	_, err := New(nil, Options{Name: "v", Stripes: 1})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = NewReader(nil, ReaderOptions{})
	require.ErrorIs(t, err, ErrInvalid)
}

func TestBadInputWritesNothing(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{MaxIDBytes: 16})
		ctx := context.Background()
		_, err := c.Add(ctx, Event{ID: "seed", Time: time.Now()}, 1)
		require.NoError(t, err)
		keys := prefixKeys(t, rc, c.opts.Prefix)
		now := time.Now()
		for _, tc := range []struct {
			name  string
			ev    Event
			delta int64
			is    error
		}{
			{"empty ID", Event{Time: now}, 1, ErrInvalid},
			{"oversized ID", Event{ID: strings.Repeat("x", 17), Time: now}, 1, ErrInvalid},
			{"zero delta", Event{ID: "a", Time: now}, 0, ErrInvalid},
			{"zero time", Event{ID: "a"}, 1, ErrInvalid},
			{"unknown generation", Event{ID: "a", Time: now, Gen: 9}, 1, ErrUnknownGeneration},
			{"time far ahead", Event{ID: "a", Time: now.Add(time.Hour)}, 1, ErrInvalid},
			{"time far behind", Event{ID: "a", Time: now.Add(-time.Hour)}, 1, ErrTooOld},
		} {
			_, err := c.Add(ctx, tc.ev, tc.delta)
			require.ErrorIs(t, err, tc.is, tc.name)
		}
		for _, n := range []int{0, -1, MaxStripes + 1} {
			_, err := c.Resize(ctx, n)
			require.ErrorIs(t, err, ErrInvalid, "Resize(%d)", n)
		}
		_, err = c.Stamp(ctx, "")
		require.ErrorIs(t, err, ErrInvalid)
		require.Equal(t, keys, prefixKeys(t, rc, c.opts.Prefix), "no key was created")
		require.Equal(t, int64(1), mustSum(t, c))
		require.Len(t, mustLayout(t, c).doc.Gens, 1)
	})
}

func TestScriptsValidateBeforeWriting(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{Stripes: 1})
		ctx := context.Background()
		require.Zero(t, mustSum(t, c))
		gd := mustLayout(t, c).gen(1)
		key := c.keys.of(gd, 0)
		now := time.Now().UnixMilli()
		good := []any{"1", "12345", "1", now, 60000, 15000, 512, "0", "0"}
		for k, bad := range map[int][]any{
			0: {"0", "x", "-1"},
			1: {"0", "-5", "abc", "12345678901234567890", "9223372036854775808", "9999999999999999999"},
			2: {"0", "00", "-0", "01", "1.5", "x", "123456789012345678901", "9223372036854775808", "-9223372036854775809", "99999999999999999999"},
			3: {"-1", "x"},
			4: {"0", "x"},
			5: {"0", "120000"},
			6: {"1", "x"},
			7: {"2", ""},
			8: {"2", "", "yes"},
		} {
			for _, v := range bad {
				args := append([]any(nil), good...)
				args[k] = v
				err := addScript.Run(ctx, rc, []string{key}, args...).Err()
				require.Error(t, err, "ARGV[%d]=%v", k+1, v)
				require.Contains(t, err.Error(), "stripes:", "ARGV[%d]=%v", k+1, v)
			}
		}
		// An overflowing delta is refused by HINCRBY, the script's first write.
		require.NoError(t, addScript.Run(ctx, rc, []string{key}, "1", "77", "9223372036854775807", now, 60000, 15000, 512, "0", "0").Err())
		reply, err := addScript.Run(ctx, rc, []string{key}, "1", "78", "1", now, 60000, 15000, 512, "0", "0").Int64Slice()
		require.NoError(t, err)
		require.Equal(t, []int64{addOverflow, 0}, reply, "an overflowing delta gets its own reply")
		for _, delta := range []string{"1", "99999999999999999999"} {
			err := addScript.Run(ctx, rc, []string{key}, "1", "78", delta, now, 60000, 15000, 512, "0", "0").Err()
			if delta != "1" {
				require.ErrorContains(t, err, "stripes: bad delta", "delta %s", delta)
			}
			set := setKey(key, now/15000, 0)
			in, err := nodeFor(t, rc, key).SMIsMember(ctx, set, "0", "77", "78").Result()
			require.NoError(t, err)
			require.Equal(t, []bool{true, true, false}, in, "%s holds its marker and the first event's record, not the refused event's", set)
		}
		v, err := nodeFor(t, rc, key).HGet(ctx, key, "v").Int64()
		require.NoError(t, err)
		require.Equal(t, int64(9223372036854775807), v)
	})
}

func TestOverflowingDeltaIsInvalidAndWritesNothing(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{Stripes: 1})
		ctx := context.Background()
		now := time.Now()
		_, err := c.Add(ctx, Event{ID: "max", Time: now}, math.MaxInt64)
		require.NoError(t, err)
		over := Event{ID: "over", Time: now}
		for attempt := range 2 {
			_, err = c.Add(ctx, over, 1)
			require.ErrorIs(t, err, ErrInvalid, "attempt %d", attempt)
			require.Contains(t, err.Error(), "overflow")
			_, errs := c.AddBatch(ctx, []Addition{{over, 1}})
			require.ErrorIs(t, errs[0], ErrInvalid, "batch attempt %d", attempt)
		}
		require.Equal(t, int64(math.MaxInt64), mustSum(t, c), "nothing was added")
		// Nothing was remembered either: once the value leaves room, the event counts.
		res, err := c.Add(ctx, Event{ID: "down", Time: now}, -1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		res, err = c.Add(ctx, over, 1)
		require.NoError(t, err)
		require.True(t, res.Applied, "the refused event was not recorded as counted")
		require.Equal(t, int64(math.MaxInt64), mustSum(t, c))
	})
}

func TestBinaryIDsAreCountedOnce(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		c := newCounter(t, rc, Options{Stripes: 4, MaxIDBytes: 16})
		ctx := context.Background()
		now := time.Now()
		ids := []string{"\xff\xfe", "\xff\xff", "\x00", "\x00\x00", "a\x00b", string([]byte{0xc3, 0x28}), strings.Repeat("\x80", 16)}
		for _, id := range ids {
			res, err := c.Add(ctx, Event{ID: id, Time: now}, 1)
			require.NoError(t, err, "ID %q", id)
			require.True(t, res.Applied, "ID %q is new", id)
		}
		for _, id := range ids {
			res, err := c.Add(ctx, Event{ID: id, Time: now}, 1)
			require.NoError(t, err, "ID %q", id)
			require.False(t, res.Applied, "retry of ID %q", id)
		}
		_, err := c.Stamp(ctx, "\xff")
		require.NoError(t, err)
		require.Equal(t, int64(len(ids)), mustSum(t, c))
	})
}
