package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/escrow"
)

// TestEscrowAuditHoldersAndReconcile drives a pool with the library, as a service would, and
// inspects it with the CLI: a clean audit, the holders, then a ledger whose server lost its
// data, which the audit flags and reconcile brings back.
func TestEscrowAuditHoldersAndReconcile(t *testing.T) {
	ledger := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	witness := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	opts := escrow.PoolOptions{Name: "video", Capacity: 10,
		Owners:  []escrow.Owner{{Name: "eu", First: 1, Last: 5}, {Name: "us", First: 6, Last: 10}},
		Witness: witness.Client(t)}
	pool, err := escrow.NewPool(ledger.Client(t), opts)
	require.NoError(t, err)
	require.NoError(t, pool.Init(t.Context()))
	g, err := pool.Acquire(t.Context(), "eu", "job-1")
	require.NoError(t, err)
	_, err = pool.Acquire(t.Context(), "us", "job-2")
	require.NoError(t, err)

	flags := []string{"--addr", ledger.Addr(), "--witness", witness.Addr(), "--pool", "video", "--capacity", "10", "--owners", "eu=1-5,us=6-10"}
	r := cli(t, "", nil, append([]string{"escrow", "audit", "--json"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	rep := decodeJSON[escrow.AuditReport](t, r.stdout)
	require.Equal(t, 2, rep.Held)
	require.Equal(t, 8, rep.Free)
	require.True(t, rep.Clean())

	r = cli(t, "", nil, append([]string{"escrow", "holders", "--owner", "eu"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "eu: 1 holder(s)")
	require.Contains(t, r.stdout, `job "job-1"`)
	require.Contains(t, r.stdout, "permit "+itoa(g.Permit))

	// The ledger server loses everything: the audit must say so and exit non-zero.
	require.NoError(t, ledger.Client(t).FlushAll(t.Context()).Err())
	r = cli(t, "", nil, append([]string{"escrow", "audit"}, flags...)...)
	require.Equal(t, 1, r.code, "a lost ledger is not a clean audit: %s", r.stdout)
	require.Contains(t, r.stderr, "the audit found problems")

	r = cli(t, "no\n", nil, append([]string{"escrow", "reconcile", "--owner", "eu"}, flags...)...)
	require.Equal(t, 2, r.code, "declined: nothing reconciled")

	r = cli(t, "", nil, append([]string{"escrow", "reconcile"}, flags...)...)
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "needs --owner")
}

func TestEscrowBadFlagsChangeNothing(t *testing.T) {
	s := celebritytest.Standalone(t)
	for name, args := range map[string][]string{
		"no pool":        {"escrow", "audit", "--addr", s.Addr()},
		"bad owners":     {"escrow", "audit", "--addr", s.Addr(), "--pool", "p", "--capacity", "10", "--owners", "eu=1..5"},
		"colon in name":  {"escrow", "audit", "--addr", s.Addr(), "--pool", "a:b", "--capacity", "10", "--owners", "eu=1-10"},
		"bad subcommand": {"escrow", "frob"},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, "", nil, args...)
			require.Equal(t, 2, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
			require.NotEmpty(t, strings.TrimSpace(r.stderr))
		})
	}
}
