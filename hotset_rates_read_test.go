package celebrity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestReadFleetRatesShowsWhatTheFleetReadsNow runs two instances reading one key through
// Redis (a short Fresh) and reads the fleet's rates as a tool would, without a Cache: the
// key is there with the sum of both instances' reports, and it is gone once they stop.
func TestReadFleetRatesShowsWhatTheFleetReadsNow(t *testing.T) {
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		key := p + "post:7"
		src.bump(key)
		o := loopOptions()
		o.Loop.PromoteRate = 1e6 // measured, never promoted: the rate stays what the readers make
		caches := []*celebrity.Cache[string]{newCache(t, d.client(t), src, p, o), newCache(t, d.client(t), src, p, o)}
		read := func() celebrity.FleetRates {
			fr, err := celebrity.ReadFleetRates(t.Context(), d.client(t), p, o.Loop.ReportInterval, o.Loop.SummaryShards)
			require.NoError(t, err)
			require.Equal(t, p, fr.Prefix)
			require.Equal(t, o.Loop.ReportInterval, fr.Interval)
			return fr
		}
		stop := readers(t, caches, key)
		require.Eventually(t, func() bool { return read().Rates[key] >= 2*o.Loop.ReportMinRate }, 30*time.Second, 10*time.Millisecond)
		stop()
		require.Eventually(t, func() bool { _, ok := read().Rates[key]; return !ok }, 30*time.Second, 10*time.Millisecond,
			"an interval without reads has no rate for the key")
		fr := read()
		require.WithinDuration(t, time.Now().Add(-2*o.Loop.ReportInterval), fr.Start, 2*o.Loop.ReportInterval, "the last complete interval")
	})
}

func TestReadFleetRatesRefusesBadArguments(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	for want, call := range map[string]func() error{
		"prefix must be":   func() error { _, err := celebrity.ReadFleetRates(t.Context(), c, "a{b", 0, 0); return err },
		"interval must be": func() error { _, err := celebrity.ReadFleetRates(t.Context(), c, "", -time.Second, 0); return err },
		"shards must be":   func() error { _, err := celebrity.ReadFleetRates(t.Context(), c, "", 0, 5000); return err },
		"client must not":  func() error { _, err := celebrity.ReadFleetRates(context.Background(), nil, "", 0, 0); return err },
	} {
		err := call()
		require.True(t, errors.Is(err, celebrity.ErrInvalid), "%v", err)
		require.Contains(t, err.Error(), want)
	}
}
