package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/ratelimit"
)

// TestRatelimitStatusInEveryMode admits requests with the library, as a service would, and
// checks that `ratelimit status` reports the same use of the limit, in every mode and window,
// on a standalone server and on a cluster (where a leased key's slots sit on distinct masters).
func TestRatelimitStatusInEveryMode(t *testing.T) {
	for _, topo := range []string{"standalone", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			var c redis.UniversalClient
			var conn []string
			if topo == "standalone" {
				s := celebritytest.Standalone(t)
				c, conn = s.Client(t), []string{"--addr", s.Addr()}
			} else {
				cl := celebritytest.SharedCluster(t)
				c, conn = cl.Client(t), []string{"--cluster", cl.Addrs()[0]}
			}
			prefix := celebritytest.NewPrefix(t) + "rl:"
			lim := ratelimit.Limit{Rate: 100, Period: time.Hour}
			for _, tc := range []struct {
				name  string
				o     ratelimit.Options
				flags []string
				n     int
			}{
				{"exact-gcra", ratelimit.Options{Limit: lim}, []string{"--mode", "exact"}, 7},
				{"exact-sliding", ratelimit.Options{Limit: lim, Window: ratelimit.Sliding}, []string{"--mode", "exact", "--window", "sliding"}, 9},
				{"exact-fixed", ratelimit.Options{Limit: lim, Window: ratelimit.Fixed}, []string{"--window", "fixed"}, 11},
				{"leased", ratelimit.Options{Limit: lim, Mode: ratelimit.Leased, Slots: 3, MaxChunk: 4}, []string{"--mode", "leased", "--slots", "3"}, 13},
				{"approximate", ratelimit.Options{Limit: lim, Mode: ratelimit.Approximate, MaxUnsynced: 1}, []string{"--mode", "approximate"}, 5},
			} {
				t.Run(tc.name, func(t *testing.T) {
					key := "merchant:" + tc.name + ":{42}"
					tc.o.Prefix = prefix
					l, err := ratelimit.New(c, tc.o)
					require.NoError(t, err)
					for range tc.n {
						r, err := l.Allow(t.Context(), key)
						require.NoError(t, err)
						require.True(t, r.Allowed)
					}
					stats := l.Stats()
					require.NoError(t, l.Close())
					args := append([]string{"ratelimit", "status", key, "merchant:idle", "--json", "--prefix", prefix,
						"--rate", "100", "--period", "1h"}, tc.flags...)
					r := cli(t, "", nil, append(args, conn...)...)
					require.Equal(t, 1, r.code, "merchant:idle has no state: %s", r.stderr)
					got := decodeJSON[[]limitStatus](t, r.stdout)
					require.Len(t, got, 2)
					st := got[0]
					want := int64(tc.n)
					if tc.o.Mode == ratelimit.Leased {
						want = int64(stats.Cells) // chunks granted count, spent or not
						require.Len(t, st.Slots, 3)
					}
					if tc.o.Mode == ratelimit.Approximate {
						// Redis holds what the instance synced. A request syncs before it is
						// decided, so with MaxUnsynced 1 each request syncs the admission
						// before it, and the last one waits for the next request.
						want = int64(tc.n - 1)
					}
					require.Equal(t, want, st.Used, "%+v", st)
					require.Equal(t, 100-want, st.Remaining)
					require.Positive(t, st.ResetAfterMs)
					require.True(t, st.Stored)
					require.False(t, got[1].Stored, "nothing is stored for a key never used")
					require.Zero(t, got[1].Used, "a key never used has its whole limit")
					text := append([]string{"ratelimit", "status", key, "--prefix", prefix, "--rate", "100", "--period", "1h"}, tc.flags...)
					r = cli(t, "", nil, append(text, conn...)...)
					require.Equal(t, 0, r.code, r.stderr)
					require.Contains(t, r.stdout, fmt.Sprintf("%s: %s %s, 100 per 1h0m0s: used %d, remaining %d", key, st.Mode, st.Window, want, 100-want))
					require.Equal(t, int64(100), got[1].Remaining)
				})
			}
		})
	}
}

func TestRatelimitStatusBadInput(t *testing.T) {
	s := celebritytest.Standalone(t)
	conn := []string{"--addr", s.Addr()}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no key":            {[]string{"ratelimit", "status", "--rate", "10", "--period", "1s"}, "ratelimit status KEY"},
		"no rate":           {[]string{"ratelimit", "status", "k", "--period", "1s"}, "--rate is required"},
		"no period":         {[]string{"ratelimit", "status", "k", "--rate", "10"}, "--period is required"},
		"bad period":        {[]string{"ratelimit", "status", "k", "--rate", "10", "--period", "1500us"}, "whole number of milliseconds"},
		"bad mode":          {[]string{"ratelimit", "status", "k", "--rate", "10", "--period", "1s", "--mode", "fast"}, "--mode must be"},
		"gcra leased":       {[]string{"ratelimit", "status", "k", "--rate", "10", "--period", "1s", "--mode", "leased", "--window", "gcra"}, "GCRA needs Mode Exact"},
		"braces in prefix":  {[]string{"ratelimit", "status", "k", "--rate", "10", "--period", "1s", "--prefix", "a{b}"}, "Prefix"},
		"huge key":          {[]string{"ratelimit", "status", fmt.Sprint(make([]byte, 600)), "--rate", "10", "--period", "1s"}, "a key must be 1..512 bytes"},
		"unknown sub":       {[]string{"ratelimit", "reset", "k"}, `unknown subcommand "reset"`},
		"sliding not split": {[]string{"ratelimit", "status", "k", "--rate", "10", "--period", "1001ms", "--window", "sliding"}, "divisible"},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, "", nil, append(tc.args, conn...)...)
			require.Equal(t, 2, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		})
	}
	n, err := s.Client(t).Keys(t.Context(), ratelimit.DefaultPrefix+"*").Result()
	require.NoError(t, err)
	require.Empty(t, n, "nothing was written")
}
