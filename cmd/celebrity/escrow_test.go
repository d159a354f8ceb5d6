package main

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/admin"
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

	// The admin handler serves the same audit in the same shape: one JSON for both.
	srv := httptest.NewServer(admin.Must(admin.Options{Sections: map[string]admin.Section{
		"escrow": func(ctx context.Context) (any, error) { return pool.Audit(ctx) },
	}}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/escrow")
	require.NoError(t, err)
	served, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.JSONEq(t, string(served), r.stdout)
	require.Contains(t, r.stdout, `"in_transfer":0`)

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

// TestEscrowHoldersMarkLapsedLeases: a job dies holding a leased permit at eu. Until a
// take-back frees it, holders lists it with its lease marked LAPSED (it ended more than the
// skew margin ago), next to a live lease at us, in the text and in the JSON.
func TestEscrowHoldersMarkLapsedLeases(t *testing.T) {
	ctx := t.Context()
	ledger := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	witness := celebritytest.NewServer(t, celebritytest.ServerOptions{AOF: true})
	opts := escrow.PoolOptions{Name: "video", Capacity: 4, Owners: []escrow.Owner{{Name: "eu", First: 1, Last: 2}, {Name: "us", First: 3, Last: 4}},
		Witness: witness.Client(t), Lease: 100 * time.Millisecond, LeaseSkew: 50 * time.Millisecond}
	pool, err := escrow.NewPool(ledger.Client(t), opts)
	require.NoError(t, err)
	require.NoError(t, pool.Init(ctx))
	_, err = pool.Acquire(ctx, "eu", "dead")
	require.NoError(t, err)
	// Wait for the event, not a duration: the server's clock passes the lease's end plus
	// the margin.
	hs, err := pool.Holders(ctx, "eu")
	require.NoError(t, err)
	for {
		now, err := ledger.Client(t).Time(ctx).Result()
		require.NoError(t, err)
		if now.After(hs[0].Expires.Add(opts.LeaseSkew)) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	long := opts
	long.Lease = time.Hour
	livePool, err := escrow.NewPool(ledger.Client(t), long)
	require.NoError(t, err)
	_, err = livePool.Acquire(ctx, "us", "live")
	require.NoError(t, err)

	flags := []string{"--addr", ledger.Addr(), "--witness", witness.Addr(), "--pool", "video", "--capacity", "4", "--owners", "eu=1-2,us=3-4", "--lease-skew", "50ms"}
	r := cli(t, "", nil, append([]string{"escrow", "holders"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "eu: 1 holder(s), 1 lapsed")
	require.Contains(t, r.stdout, "us: 1 holder(s), 0 lapsed")
	var dead, live string
	for _, line := range strings.Split(r.stdout, "\n") {
		switch {
		case strings.Contains(line, `"dead"`):
			dead = line
		case strings.Contains(line, `"live"`):
			live = line
		}
	}
	require.Contains(t, dead, "LAPSED")
	require.Contains(t, live, "lease until")
	require.NotContains(t, live, "LAPSED")

	r = cli(t, "", nil, append([]string{"escrow", "holders", "--json"}, flags...)...)
	require.Equal(t, 0, r.code, r.stderr)
	got := decodeJSON[map[string][]escrow.Holder](t, r.stdout)
	require.Len(t, got["eu"], 1)
	require.True(t, got["eu"][0].Lapsed, "%+v", got["eu"][0])
	require.Len(t, got["us"], 1)
	require.False(t, got["us"][0].Lapsed || got["us"][0].Expired, "%+v", got["us"][0])
}
