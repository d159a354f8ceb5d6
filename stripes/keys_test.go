package stripes

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/errs"
	"github.com/celebrity-go/celebrity/internal/slot"
)

// The key names are the stored format: a process of another version must build the same
// names to find the layout record, the birth record and the stripes of a counter.
func TestKeyNamesKeepTheirFormat(t *testing.T) {
	k := keys{prefix: PreviousDefaultPrefix, name: "course:72:views"}
	require.Equal(t, "stripes:{course:72:views}:layout", k.layout())
	require.Equal(t, "celebrity:stripes:{course:72:views}:layout", keys{prefix: DefaultPrefix, name: "course:72:views"}.layout())
	require.Equal(t, "stripes:{7}:course:72:views:3:12", k.stripe("7", 3, 12))
	require.Equal(t, "stripes:{x}:course:72:views:18446744073709551615:4095", k.stripe("x", 1<<64-1, 4095))
	births := k.births()
	require.Regexp(t, `^stripes:\{[0-9]+\}:births$`, births)
	want := (slot.Of(k.layout())/64*64 + slot.Count/2) % slot.Count
	require.Equal(t, want, slot.Of(births), "the birth records of a layout's 64-slot block share one key")
}

// FamilyOptions.withDefaults fills the documented defaults and names the field and the
// allowed range of a bad value, without any I/O.
func TestFamilyOptionsDefaultsAndErrors(t *testing.T) {
	o, err := FamilyOptions{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 1, o.Counter.Stripes)
	require.Empty(t, o.Counter.Name)
	require.Equal(t, DefaultPrefix, o.Counter.Prefix)
	require.Equal(t, DefaultDedupWindow/4, o.Counter.SealInterval)
	require.Equal(t, DefaultMaxNames, o.MaxNames)
	require.Equal(t, DefaultIdleAfter, o.IdleAfter)
	require.Equal(t, DefaultFamilyInterval, o.Interval)
	require.Equal(t, DefaultFamilyStaleness, o.MaxStaleness)
	require.Equal(t, DefaultCoolAfter, o.CoolAfter)

	o, err = FamilyOptions{HotStripes: 8, HotRate: 100}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 10.0, o.CoolRate, "CoolRate defaults to HotRate/10")

	for _, tc := range []struct {
		o    FamilyOptions
		want string
	}{
		{FamilyOptions{Counter: Options{Name: "x"}}, "FamilyOptions.Counter.Name must be empty"},
		{FamilyOptions{Counter: Options{Stripes: 5000}}, "Options.Stripes must be 1..4096, got 5000"},
		{FamilyOptions{Counter: Options{DedupWindow: time.Millisecond}}, "Options.DedupWindow must be 100ms..168h0m0s, got 1ms"},
		{FamilyOptions{MaxNames: -1}, "FamilyOptions.MaxNames must be at least 1, got -1"},
		{FamilyOptions{IdleAfter: -time.Second}, "FamilyOptions.IdleAfter must not be negative, got -1s"},
		{FamilyOptions{Counter: Options{Stripes: 4}, HotStripes: 4}, "FamilyOptions.HotStripes must be 0 or 5..4096"},
		{FamilyOptions{HotRate: -1}, "FamilyOptions.HotRate and CoolRate must be finite and not negative"},
		{FamilyOptions{HotRate: math.NaN()}, "FamilyOptions.HotRate and CoolRate must be finite and not negative, got NaN and"},
		{FamilyOptions{HotRate: math.Inf(1)}, "FamilyOptions.HotRate and CoolRate must be finite and not negative, got +Inf and"},
		{FamilyOptions{HotRate: 100, CoolRate: math.NaN()}, "FamilyOptions.HotRate and CoolRate must be finite and not negative, got 100 and NaN"},
		{FamilyOptions{HotRate: 100, CoolRate: math.Inf(-1)}, "FamilyOptions.HotRate and CoolRate must be finite and not negative, got 100 and -Inf"},
		{FamilyOptions{HotRate: 10, CoolRate: 20}, "FamilyOptions.CoolRate must not exceed HotRate (10), got 20"},
		{FamilyOptions{CoolAfter: -time.Second}, "FamilyOptions.CoolAfter must not be negative, got -1s"},
	} {
		_, err := tc.o.withDefaults()
		require.ErrorIs(t, err, ErrInvalid, tc.want)
		require.ErrorContains(t, err, tc.want)
	}
}

// heat decides promotion and cooling from the measured rate and the detector alone.
func TestFamilyHeatWithoutRedis(t *testing.T) {
	rates := FamilyOptions{HotRate: 100, CoolRate: 10}
	for _, tc := range []struct {
		o              FamilyOptions
		rate           float64
		detected       bool
		wantHot, wantC bool
	}{
		{rates, 100, false, true, false},
		{rates, 99, false, false, false}, // between CoolRate and HotRate: neither
		{rates, 9, false, false, true},
		{rates, 0, true, true, false}, // the detector overrides a low rate
		{FamilyOptions{}, 1e9, false, false, true},
		{FamilyOptions{}, 0, true, true, false},
	} {
		hot, cool := tc.o.heat(tc.rate, tc.detected)
		require.Equal(t, tc.wantHot, hot, "%+v", tc)
		require.Equal(t, tc.wantC, cool, "%+v", tc)
	}
}

// Typed sentinels tie to the sentinel they are a kind of by Is: a vanished state is a
// layout contradiction, and a missing counter is the project's "not found".
func TestSentinelKinds(t *testing.T) {
	v := vanishedf("stripe %d is missing", 3)
	require.ErrorIs(t, v, ErrVanished)
	require.ErrorIs(t, v, ErrLayout)
	require.NotErrorIs(t, fmt.Errorf("%w: x", ErrLayout), ErrVanished)
	n := fmt.Errorf("%w: %q", ErrNoCounter, "views")
	require.ErrorIs(t, n, ErrNoCounter)
	require.ErrorIs(t, n, errs.ErrNotFound)
	require.NotErrorIs(t, errs.ErrNotFound, ErrNoCounter)
	require.Equal(t, "stripes: no such counter: \"views\"", n.Error())
}
