package main

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/celebrity-go/celebrity/stripes"
)

// TestRatelimitStatusSaysWhenItsFlagsReadNothing: a service limits merchant:42 to 500 per
// hour; the operator's flags must match that limit (it is part of every key). Without
// --rate the tool says so; with --rate 5000, or with a mistyped key, it reads keys nobody
// writes and says that nothing is stored, exiting 1, instead of reporting a used 0.
func TestRatelimitStatusSaysWhenItsFlagsReadNothing(t *testing.T) {
	s := celebritytest.Standalone(t)
	prefix := celebritytest.NewPrefix(t) + "rl:"
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

// TestStripesSumPrintsTheOthersAndReportsAMissingName: one mistyped name among several
// neither hides the sums of the others nor passes for a zero.
func TestStripesSumPrintsTheOthersAndReportsAMissingName(t *testing.T) {
	s := celebritytest.Standalone(t)
	prefix := celebritytest.NewPrefix(t) + "stripes:"
	for name, n := range map[string]int{"views": 2, "likes": 1} {
		ctr, err := stripes.New(s.Client(t), stripes.Options{Name: name, Prefix: prefix, Stripes: 2, SealInterval: -1})
		require.NoError(t, err)
		for i := range n {
			_, err := ctr.Add(t.Context(), stripes.Event{ID: name + itoa(i), Time: time.Now()}, 1)
			require.NoError(t, err)
		}
		require.NoError(t, ctr.Close())
	}

	r := cli(t, "", nil, "stripes", "sum", "views", "viewz", "likes", "--addr", s.Addr(), "--prefix", prefix)
	require.Equal(t, result{code: 2, stdout: "views\t2\nlikes\t1\n",
		stderr: `celebrity: no counter "viewz" under prefix "` + prefix + "\"\n"}, r)

	r = cli(t, "", nil, "stripes", "sum", "nope", "viewz", "--addr", s.Addr(), "--prefix", prefix)
	require.Equal(t, result{code: 2,
		stderr: `celebrity: no counter "nope" under prefix "` + prefix + `"; no counter "viewz" under prefix "` + prefix + "\"\n"}, r)

	r = cli(t, "", nil, "stripes", "sum", "views", "likes", "--addr", s.Addr(), "--prefix", prefix)
	require.Equal(t, result{code: 0, stdout: "views\t2\nlikes\t1\n"}, r)
}

// TestEscrowHoldersSaysWhenThePoolOrALedgerIsMissing: holders of a pool that does not exist
// under the flags (a mistyped --pool) is refused rather than printed as zero holders, and an
// owner whose ledger is gone is named, with a non-zero exit.
func TestEscrowHoldersSaysWhenThePoolOrALedgerIsMissing(t *testing.T) {
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	pool, err := escrow.NewPool(s.Client(t), escrow.PoolOptions{Name: "video", Capacity: 10, AllowSharedWitness: true,
		Owners: []escrow.Owner{{Name: "eu", First: 1, Last: 5}, {Name: "us", First: 6, Last: 10}}})
	require.NoError(t, err)
	require.NoError(t, pool.Init(t.Context()))
	_, err = pool.Acquire(t.Context(), "eu", "job-1")
	require.NoError(t, err)
	holders := func(name string) result {
		return cli(t, "", nil, "escrow", "holders", "--addr", s.Addr(), "--pool", name, "--capacity", "10", "--owners", "eu=1-5,us=6-10")
	}

	r := holders("vidoe")
	require.Equal(t, result{code: 2,
		stderr: `celebrity: pool "vidoe" does not exist under prefix "celebrity:escrow:": no owner has a ledger (check --pool and --prefix)` + "\n"}, r)

	r = holders("video")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^eu: 1 holder\(s\), 0 lapsed\n  permit \d+ +token \d+ +no lease +job "job-1"\nus: 0 holder\(s\), 0 lapsed\n$`, r.stdout)

	keys, err := s.Client(t).Keys(t.Context(), "celebrity:escrow:{video:us}:*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys, "the layout names us's ledger keys")
	require.NoError(t, s.Client(t).Del(t.Context(), keys...).Err())
	r = holders("video")
	require.Equal(t, 1, r.code, r.stderr)
	require.Regexp(t, `^eu: 1 holder\(s\), 0 lapsed\n  permit .*\nus: no ledger \(lost, or never initialized: see escrow audit\)\n$`, r.stdout)
	require.Equal(t, "celebrity: no ledger for owner(s) us of pool \"video\"\n", r.stderr)
}

// TestOperatorsAreToldOfThePreviousDefaultPrefix: a pool or a counter that a version before
// v0.2.0 created under its default prefix is not reported as missing under the new default,
// but named with the flag that finds it.
func TestOperatorsAreToldOfThePreviousDefaultPrefix(t *testing.T) {
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	pool, err := escrow.NewPool(s.Client(t), escrow.PoolOptions{Name: "video", Capacity: 2, AllowSharedWitness: true,
		AllowWeakDurability: true, Prefix: escrow.PreviousDefaultPrefix, Owners: []escrow.Owner{{Name: "eu", First: 1, Last: 2}}})
	require.NoError(t, err)
	require.NoError(t, pool.Init(t.Context()))
	r := cli(t, "", nil, "escrow", "holders", "--addr", s.Addr(), "--pool", "video", "--capacity", "2", "--owners", "eu=1-2")
	require.Equal(t, result{code: 2, stderr: `celebrity: pool "video" does not exist under prefix "celebrity:escrow:", the default since v0.2.0; ` +
		`it exists under "escrow:", the default before: give --prefix escrow:` + "\n"}, r)
	r = cli(t, "", nil, "escrow", "holders", "--addr", s.Addr(), "--pool", "video", "--capacity", "2", "--owners", "eu=1-2", "--prefix", "escrow:")
	require.Equal(t, 0, r.code, r.stderr)
	// The audit under the default would report every permit missing, and an operator
	// following it would reconcile a ledger that is not lost.
	for _, prefix := range []string{"", escrow.DefaultPrefix} {
		r = cli(t, "", nil, "escrow", "audit", "--addr", s.Addr(), "--pool", "video", "--capacity", "2", "--owners", "eu=1-2", "--prefix", prefix)
		require.Equal(t, result{code: 2, stderr: `celebrity: pool "video" does not exist under prefix "celebrity:escrow:", the default since v0.2.0; ` +
			`it exists under "escrow:", the default before: give --prefix escrow:` + "\n"}, r, "--prefix %q", prefix)
	}
	r = cli(t, "", nil, "escrow", "recover", "--addr", s.Addr(), "--pool", "video", "--capacity", "2", "--owners", "eu=1-2")
	require.Equal(t, 2, r.code, "recover does not report a pool it cannot see as recovered: %s", r.stdout)
	require.Contains(t, r.stderr, "give --prefix escrow:")
	r = cli(t, "", nil, "escrow", "audit", "--addr", s.Addr(), "--pool", "video", "--capacity", "2", "--owners", "eu=1-2", "--prefix", "escrow:")
	require.Equal(t, 0, r.code, r.stderr)
	r = cli(t, "", nil, "escrow", "reconcile", "--addr", s.Addr(), "--pool", "video", "--capacity", "2", "--owners", "eu=1-2", "--owner", "eu", "--yes")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, `set Prefix to "escrow:" on every process`, "reconcile creates no ledger under the new default")

	ctr, err := stripes.New(s.Client(t), stripes.Options{Name: "views", Prefix: stripes.PreviousDefaultPrefix, Stripes: 1, SealInterval: -1})
	require.NoError(t, err)
	_, err = ctr.Add(t.Context(), stripes.Event{ID: "view-1", Time: time.Now()}, 1)
	require.NoError(t, err)
	require.NoError(t, ctr.Close())
	r = cli(t, "", nil, "stripes", "sum", "views", "--addr", s.Addr())
	require.Equal(t, result{code: 2, stderr: `celebrity: no counter "views" under prefix "celebrity:stripes:", the default since v0.2.0; ` +
		`it exists under "stripes:", the default before: give --prefix stripes:` + "\n"}, r)
	r = cli(t, "", nil, "stripes", "sum", "views", "--addr", s.Addr(), "--prefix", "stripes:")
	require.Equal(t, result{code: 0, stdout: "views\t1\n"}, r)
}

// TestAddressConflictNamesTheVariable: an operator with CELEBRITY_ADDR in the environment who
// types --cluster is told which variable set the other address.
func TestAddressConflictNamesTheVariable(t *testing.T) {
	r := cli(t, "", []string{"CELEBRITY_ADDR=127.0.0.1:1"}, "top", "--once", "--cluster", "127.0.0.1:2")
	require.Equal(t, result{code: 2,
		stderr: "celebrity: give --addr or --cluster, not both (--addr comes from CELEBRITY_ADDR=127.0.0.1:1; unset it or pass --addr '')\n"}, r)
	r = cli(t, "", nil, "top", "--once", "--cluster", "127.0.0.1:2", "--addr", "127.0.0.1:1")
	require.Equal(t, result{code: 2, stderr: "celebrity: give --addr or --cluster, not both\n"}, r)
}

// TestGoRedisLogsStayOutOfTheOutput runs commands against a cluster, where go-redis logs its
// internals (maintenance notification handlers, its connection pool) through its own
// logger: what the operator reads is the tool's output and nothing else.
func TestGoRedisLogsStayOutOfTheOutput(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	prefix := celebritytest.NewPrefix(t)
	ctr, err := stripes.New(cl.Client(t), stripes.Options{Name: "views", Prefix: prefix, Stripes: 3, SealInterval: -1})
	require.NoError(t, err)
	_, err = ctr.Add(t.Context(), stripes.Event{ID: "e1", Time: time.Now()}, 1)
	require.NoError(t, err)
	require.NoError(t, ctr.Close())
	for _, args := range [][]string{
		{"stripes", "sum", "views", "--prefix", prefix},
		{"stripes", "status", "views", "--prefix", prefix},
		{"top", "--once", "--interval", "100ms"},
	} {
		r := cli(t, "", nil, append(args, "--cluster", cl.Addrs()[0])...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Empty(t, r.stderr, "%v", args)
		require.NotRegexp(t, `maintnotifications|\w+\.go:\d+`, r.stdout, "%v", args)
	}
}
