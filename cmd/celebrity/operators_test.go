package main

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/ratelimit"
)

// TestRatelimitStatusSaysWhenItsFlagsReadNothing: a service limits merchant:42 to 500 per
// hour; the operator's flags must match that limit (it is part of every key). Without
// --rate the tool says so; with --rate 5000, or with a mistyped key, it reads keys nobody
// writes and says that nothing is stored, exiting 1, instead of reporting a used 0.
func TestRatelimitStatusSaysWhenItsFlagsReadNothing(t *testing.T) {
	s := celebritytest.Standalone(t)
	prefix := celebritytest.Prefix(t) + "rl:"
	lim, err := ratelimit.New(s.Client(t), ratelimit.Options{Prefix: prefix, Limit: ratelimit.Limit{Rate: 500, Period: time.Hour}})
	require.NoError(t, err)
	for range 3 {
		r, err := lim.Allow(t.Context(), "merchant:42")
		require.NoError(t, err)
		require.True(t, r.Allowed)
	}
	require.NoError(t, lim.Close())
	status := func(args ...string) result {
		return cli(t, "", nil, append([]string{"ratelimit", "status", "--addr", s.Addr(), "--prefix", prefix, "--period", "1h"}, args...)...)
	}

	r := status("merchant:42")
	require.Equal(t, result{code: 2, stderr: "celebrity: --rate is required: the service's Options.Limit.Rate (the limit is part of every key)\n"}, r)

	r = status("merchant:42", "--rate", "5000")
	require.Equal(t, result{code: 1,
		stdout: "merchant:42: exact gcra, 5000 per 1h0m0s: no state stored for this key under this limit (check --rate/--period/--mode)\n",
		stderr: "celebrity: no state stored for 1 of 1 key(s) under this limit: check the key and --rate/--period/--burst/--mode/--window/--prefix against the service's options, or the key is idle\n",
	}, r)

	r = status("merchant:42", "merchant:24", "--rate", "500")
	require.Equal(t, 1, r.code, r.stderr)
	require.Regexp(t, regexp.MustCompile(`^merchant:42: exact gcra, 500 per 1h0m0s: used 3, remaining 497, full again in \S+\n`+
		`merchant:24: exact gcra, 500 per 1h0m0s: no state stored for this key under this limit \(check --rate/--period/--mode\)\n$`), r.stdout)
	require.Equal(t, "celebrity: no state stored for 1 of 2 key(s) under this limit: check the key and --rate/--period/--burst/--mode/--window/--prefix against the service's options, or the key is idle\n", r.stderr)

	r = status("merchant:42", "--rate", "500", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	got := decodeJSON[[]limitStatus](t, r.stdout)
	require.Len(t, got, 1)
	require.True(t, got[0].Stored)
	require.Equal(t, int64(3), got[0].Used)
}
