package stripes

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

// sweepNames are counter names an acceptance suite probes with; want is "" for a name that
// must be accepted and round-trip, else the text the refusal must contain. "a:b" and "a_b",
// "\xff\xfe" and "\ufffd", "a\x00b" and "a" are pairs a mangling encoder would merge.
var sweepNames = []struct{ name, want string }{
	{"", "name must be 1..128 bytes, got 0"},
	{"\xff\xfe", ""}, {"\ufffd", ""}, {"a\x00b", ""}, {"a", ""}, {"a:b", ""}, {"a_b", ""},
	{":", ""}, {"a:1:0", ""},
	{"{", "name must not contain '{' or '}'"}, {"}", "name must not contain '{' or '}'"},
	{"{tag}", "name must not contain '{' or '}'"},
	{strings.Repeat("m", 1<<20), "name must be 1..128 bytes, got 1048576"},
}

// TestCounterNamesRoundTripOrAreRefused: each accepted name counts on its own (its sum is its
// own delta) and ReadLayout gives the name back; each refused one fails New and ReadLayout
// with ErrInvalid naming the field, and nothing is written under the prefix.
func TestCounterNamesRoundTripOrAreRefused(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := context.Background()
		p := celebritytest.NewPrefix(t)
		now := time.Now()
		for i, tc := range sweepNames {
			_, rerr := ReadLayout(ctx, rc, p, tc.name)
			if tc.want != "" {
				_, err := New(rc, Options{Name: tc.name, Prefix: p, Stripes: 2})
				require.ErrorIs(t, err, ErrInvalid, "name %.20q", tc.name)
				require.ErrorContains(t, err, "Options.N"+tc.want[1:], "name %.20q", tc.name)
				require.ErrorIs(t, rerr, ErrInvalid, "name %.20q", tc.name)
				require.ErrorContains(t, rerr, "counter "+tc.want, "name %.20q", tc.name)
				continue
			}
			require.ErrorIs(t, rerr, ErrNoCounter, "name %.20q before its creation", tc.name)
			c := newCounter(t, rc, Options{Name: tc.name, Prefix: p, Stripes: 2})
			_, err := c.Add(ctx, Event{ID: "e", Time: now}, int64(i+1))
			require.NoError(t, err, "name %.20q", tc.name)
		}
		for i, tc := range sweepNames {
			if tc.want != "" {
				continue
			}
			c := newCounter(t, rc, Options{Name: tc.name, Prefix: p, Stripes: 2})
			require.Equal(t, int64(i+1), mustSum(t, c), "name %.20q", tc.name)
			lo, err := ReadLayout(ctx, rc, p, tc.name)
			require.NoError(t, err, "name %.20q", tc.name)
			require.Equal(t, tc.name, lo.Name)
			require.Equal(t, int64(i+1), lo.Base+stripeTotal(lo), "name %.20q", tc.name)
		}
	})
}

// stripeTotal adds the stripe values ReadLayout read.
func stripeTotal(lo Layout) int64 {
	var n int64
	for _, g := range lo.Generations {
		n += g.Total
	}
	return n
}

// TestFamilyNamesRoundTripOrAreRefused: the same names given per call to a Family. A refused
// name fails Add, AddBatch, Sum and Resize with ErrInvalid naming the name, and writes nothing.
func TestFamilyNamesRoundTripOrAreRefused(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := context.Background()
		p := celebritytest.NewPrefix(t)
		f := newFamily(t, rc, FamilyOptions{Counter: Options{Prefix: p, DedupWindow: time.Minute, SealInterval: -1}})
		now := time.Now()
		for i, tc := range sweepNames {
			if tc.want == "" {
				continue
			}
			_, err := f.Add(ctx, tc.name, Event{ID: "e", Time: now}, int64(i+1))
			_, errs := f.AddBatch(ctx, []FamilyAddition{{Name: tc.name, Event: Event{ID: "e", Time: now}, Delta: 1}})
			_, serr := f.Sum(ctx, tc.name)
			_, zerr := f.Resize(ctx, tc.name, 2)
			for _, err := range []error{err, errs[0], serr, zerr} {
				require.ErrorIs(t, err, ErrInvalid, "name %.20q", tc.name)
				require.ErrorContains(t, err, tc.want, "name %.20q", tc.name)
			}
		}
		require.Zero(t, prefixKeys(t, rc, p), "a refused name writes nothing")
		for i, tc := range sweepNames {
			if tc.want == "" {
				_, err := f.Add(ctx, tc.name, Event{ID: "e", Time: now}, int64(i+1))
				require.NoError(t, err, "name %.20q", tc.name)
			}
		}
		for i, tc := range sweepNames {
			if tc.want == "" {
				v, err := f.Sum(ctx, tc.name)
				require.NoError(t, err, "name %.20q", tc.name)
				require.Equal(t, int64(i+1), v, "name %.20q", tc.name)
			}
		}
	})
}

// TestEventIDsStayDistinctOrAreRefused: IDs a mangling encoder would merge each count once,
// and an empty or 1 MiB ID is refused by Add and Stamp naming Event.ID, writing nothing.
func TestEventIDsStayDistinctOrAreRefused(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	c := newCounter(t, rc, Options{})
	now := time.Now()
	for _, id := range []string{"", strings.Repeat("i", 1<<20)} {
		_, err := c.Add(ctx, Event{ID: id, Time: now}, 1)
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, "Event.ID must be 1..")
		_, err = c.Stamp(ctx, id)
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, "Event.ID must be 1..")
	}
	require.Zero(t, prefixKeys(t, rc, c.opts.Prefix), "a refused ID writes nothing")
	ids := []string{"\xff\xfe", "\ufffd", "a\x00b", "a", "a:b", "a_b", ":", "{", "}", "{x}", "x"}
	for range 2 {
		for _, id := range ids {
			_, err := c.Add(ctx, Event{ID: id, Time: now}, 1)
			require.NoError(t, err, "ID %q", id)
		}
	}
	require.Equal(t, int64(len(ids)), mustSum(t, c))
}
