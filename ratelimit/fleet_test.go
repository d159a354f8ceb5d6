package ratelimit

import (
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The fleet of these tests: 20 instances, each with its own client (own connections), 3
// goroutines each, hammering one key for a little over three windows.
const (
	fleetSize    = 20
	fleetWorkers = 3
	fleetRate    = 300
	fleetPeriod  = 500 * time.Millisecond
	fleetRun     = 1600 * time.Millisecond
)

// requireGCRABound checks GCRA's promise on server instants: any admissions i..j happen at
// most Burst + (t_j - t_i)/T + 1 times (the +1 absorbs rounding of instants to µs).
func requireGCRABound(t *testing.T, times []time.Time, lim Limit) {
	t.Helper()
	T := float64(lim.Period.Microseconds()) / float64(lim.Rate)
	for i := range times {
		for j := i; j < len(times); j++ {
			dt := float64(times[j].Sub(times[i]).Microseconds())
			allowed := float64(lim.Burst) + dt/T + 1
			if float64(j-i+1) > allowed {
				t.Fatalf("%d admissions within %v: GCRA allows %.1f", j-i+1, times[j].Sub(times[i]), allowed)
			}
		}
	}
}

func TestExactFleetNeverExceedsTheWindow(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		for _, w := range []Window{GCRA, Sliding, Fixed} {
			t.Run(w.String(), func(t *testing.T) {
				lim := Limit{Rate: fleetRate, Period: fleetPeriod}
				if w == GCRA {
					lim.Burst = 50
				}
				var a admissions
				lims := instances(t, fleetSize, clients(t, c), Options{Limit: lim, Window: w}, &a)
				errs := hammer(t.Context(), lims, "merchant:42", fleetWorkers, fleetRun, nil)
				require.Zero(t, errs)
				if w == GCRA {
					requireGCRABound(t, a.sorted(), lim)
				} else {
					sub, k := SubMs(lims[0]), lims[0].o.span()
					worst := a.worstWindow(sub, k)
					require.LessOrEqual(t, worst, int64(fleetRate), "admitted in one window")
					require.Greater(t, worst, int64(fleetRate)/10, "the fleet should come near the limit")
				}
				t.Logf("%v: %d admitted in %v", w, a.total(), fleetRun)
			})
		}
	})
}

func TestLeasedFleetNeverExceedsTheWindow(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		for _, w := range []Window{Sliding, Fixed} {
			t.Run(w.String(), func(t *testing.T) {
				var a admissions
				o := Options{Limit: Limit{Rate: fleetRate, Period: fleetPeriod}, Mode: Leased, Window: w}
				lims := instances(t, fleetSize, clients(t, c), o, &a)
				errs := hammer(t.Context(), lims, "merchant:42", fleetWorkers, fleetRun, nil)
				require.Zero(t, errs)
				sub, k := SubMs(lims[0]), lims[0].o.span()
				worst := a.worstWindow(sub, k)
				require.LessOrEqual(t, worst, int64(fleetRate), "admitted in one window")
				require.Greater(t, worst, int64(fleetRate)/10, "the fleet should come near the limit")
				var calls uint64
				for _, l := range lims {
					calls += l.Stats().Calls
				}
				t.Logf("%v: %d admitted, %d Redis calls, worst window %d/%d", w, a.total(), calls, worst, fleetRate)
			})
		}
	})
}

func TestApproximateFleetStaysWithinTheStatedBound(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		for _, w := range []Window{Sliding, Fixed} {
			t.Run(w.String(), func(t *testing.T) {
				var a admissions
				o := Options{Limit: Limit{Rate: fleetRate, Period: fleetPeriod}, Mode: Approximate, Window: w}
				lims := instances(t, fleetSize, clients(t, c), o, &a)
				errs := hammer(t.Context(), lims, "merchant:42", fleetWorkers, fleetRun, nil)
				require.Zero(t, errs)
				sub, k := SubMs(lims[0]), lims[0].o.span()
				u := lims[0].o.MaxUnsynced
				bound := int64(fleetRate) + int64(fleetSize-1)*u
				worst := a.worstWindow(sub, k)
				require.LessOrEqual(t, worst, bound, "Rate + (N-1)·MaxUnsynced")
				require.Greater(t, worst, int64(fleetRate)/10, "the fleet should come near the limit")
				t.Logf("%v: %d admitted, worst window %d, limit %d, bound %d", w, a.total(), worst, fleetRate, bound)
			})
		}
	})
}
