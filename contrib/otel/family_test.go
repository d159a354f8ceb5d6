package celebrityotel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/celebrity-go/celebrity/celebritytest"
	celebrityotel "github.com/celebrity-go/celebrity/contrib/otel"
	"github.com/celebrity-go/celebrity/stripes"
)

// TestStripesFamilyArrivesAsNamedInstruments drives a stripes.Family on a real server and
// checks its Stats under celebrity.stripes.family.*, added over its names.
func TestStripesFamilyArrivesAsNamedInstruments(t *testing.T) {
	client := celebritytest.Standalone(t).Client(t)
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	fam, err := stripes.NewFamily(client, stripes.FamilyOptions{Counter: stripes.Options{Prefix: celebritytest.Prefix(t)},
		Interval: -1, MaxStaleness: time.Hour})
	require.NoError(t, err)
	defer fam.Close()
	_, err = celebrityotel.StripesFamily(meter, fam, celebrityotel.Options{Name: "views"})
	require.NoError(t, err)
	now := time.Now()
	for _, a := range []struct{ name, id string }{{"course:1", "a"}, {"course:1", "a"}, {"course:2", "a"}} {
		_, err := fam.Add(t.Context(), a.name, stripes.Event{ID: a.id, Time: now}, 1)
		require.NoError(t, err)
	}
	for range 2 {
		_, err := fam.Sum(t.Context(), "course:1")
		require.NoError(t, err)
	}
	got := collect(t, reader)
	for name, want := range map[string]float64{
		"celebrity.stripes.family.names": 2, "celebrity.stripes.family.applied": 2,
		"celebrity.stripes.family.duplicates": 1, "celebrity.stripes.family.sums": 1,
		"celebrity.stripes.family.cached_sums": 1, "celebrity.stripes.family.dropped": 0,
	} {
		v, ok := value(got[name], "celebrity.name", "views")
		require.True(t, ok, "no %s", name)
		require.Equal(t, want, v, name)
	}
	require.Equal(t, "{name}", got["celebrity.stripes.family.names"].Unit)
}
