package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/stripes"
)

// TestStripesStatusSumResizeSeal counts events with the library, as a service would, and
// follows the counter with the CLI through a whole resize: the layout and per-stripe values,
// the sum, a resize to a new generation, and the seal that folds the old one into the base.
func TestStripesStatusSumResizeSeal(t *testing.T) {
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
			prefix := celebritytest.Prefix(t) + "stripes:"
			conn = append(conn, "--prefix", prefix)
			const window = 2 * time.Second
			ctr, err := stripes.New(c, stripes.Options{Name: "course:72:views", Prefix: prefix, Stripes: 4,
				DedupWindow: window, SealInterval: -1})
			require.NoError(t, err)
			defer ctr.Close()
			other, err := stripes.New(c, stripes.Options{Name: "course:73:views", Prefix: prefix, Stripes: 1, SealInterval: -1})
			require.NoError(t, err)
			defer other.Close()
			for i := range 40 {
				_, err := ctr.Add(t.Context(), stripes.Event{ID: fmt.Sprint("view-", i), Time: time.Now()}, 1)
				require.NoError(t, err)
			}
			_, err = other.Add(t.Context(), stripes.Event{ID: "v", Time: time.Now()}, 7)
			require.NoError(t, err)

			st := stripesStatus(t, conn, "course:72:views")
			require.Equal(t, int64(40), st.Sum)
			require.Len(t, st.Generations, 1)
			g := st.Generations[0]
			require.Equal(t, "open", g.State)
			require.Equal(t, 4, g.Stripes)
			require.Len(t, g.Stripe, 4)
			require.Equal(t, int64(40), g.Total, "the stripes' values add up to the sum")
			require.Equal(t, "2s", st.DedupWindow, "the recorded window, not the default")
			for _, s := range g.Stripe {
				require.False(t, s.Missing)
				require.Greater(t, s.Value, int64(0), "40 events over 4 stripes reach each: %+v", g.Stripe)
			}

			r := cli(t, "", nil, append([]string{"stripes", "sum", "--json", "course:72:views", "course:73:views"}, conn...)...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Equal(t, map[string]int64{"course:72:views": 40, "course:73:views": 7}, decodeJSON[map[string]int64](t, r.stdout))

			r = cli(t, "", nil, append([]string{"stripes", "resize", "course:72:views", "8", "--yes", "--json"}, conn...)...)
			require.Equal(t, 0, r.code, r.stderr)
			res := decodeJSON[map[string]any](t, r.stdout)
			require.Equal(t, float64(2), res["gen"])
			require.Equal(t, true, res["changed"])
			r = cli(t, "", nil, append([]string{"stripes", "resize", "course:72:views", "8", "--json"}, conn...)...)
			require.Equal(t, 0, r.code, "a repeated resize asks nothing and changes nothing: %s", r.stderr)
			require.Equal(t, false, decodeJSON[map[string]any](t, r.stdout)["changed"])

			// Events keep counting across the resize: the library sees the new generation.
			for i := 40; i < 50; i++ {
				_, err := ctr.Add(t.Context(), stripes.Event{ID: fmt.Sprint("view-", i), Time: time.Now()}, 1)
				require.NoError(t, err)
			}
			st = stripesStatus(t, conn, "course:72:views")
			require.Equal(t, int64(50), st.Sum)
			require.Len(t, st.Generations, 2)
			require.Equal(t, "closed", st.Generations[0].State)
			require.NotZero(t, st.Generations[0].SealsAt)
			require.Equal(t, "open", st.Generations[1].State)
			require.Equal(t, 8, st.Generations[1].Stripes)
			require.Equal(t, int64(50), st.Generations[0].Total+st.Generations[1].Total)

			// Once the old generation's window has passed, seal folds it into the base.
			require.Eventually(t, func() bool {
				r = cli(t, "", nil, append([]string{"stripes", "seal", "course:72:views", "--json"}, conn...)...)
				require.Equal(t, 0, r.code, r.stderr)
				return len(decodeJSON[struct{ Folded []uint64 }](t, r.stdout).Folded) == 1
			}, 30*time.Second, 200*time.Millisecond)
			st = stripesStatus(t, conn, "course:72:views")
			require.Equal(t, int64(50), st.Sum)
			require.Equal(t, "folded", st.Generations[0].State)
			require.Equal(t, st.Generations[0].Folded, st.Base)
			require.Equal(t, int64(50), st.Base+st.Generations[1].Total)
			n, err := ctr.Sum(t.Context())
			require.NoError(t, err)
			require.Equal(t, int64(50), n, "the library agrees after the CLI's seal")

			r = cli(t, "", nil, append([]string{"stripes", "status", "course:72:views"}, conn...)...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stdout, `counter "course:72:views"  sum 50`)
			require.Contains(t, r.stdout, "generation 1: folded, 4 stripe(s)")
			require.Contains(t, r.stdout, "generation 2: open, 8 stripe(s)")
		})
	}
}

func stripesStatus(t *testing.T, conn []string, name string) counterStatus {
	t.Helper()
	r := cli(t, "", nil, append([]string{"stripes", "status", "--json", name}, conn...)...)
	require.Equal(t, 0, r.code, r.stderr)
	return decodeJSON[counterStatus](t, r.stdout)
}

// TestStripesBadInputChangesNothing: an unknown counter is never created, a stripe count out
// of range or a declined resize leaves the layout as it was.
func TestStripesBadInputChangesNothing(t *testing.T) {
	s := celebritytest.Standalone(t)
	c := s.Client(t)
	prefix := celebritytest.Prefix(t) + "stripes:"
	ctr, err := stripes.New(c, stripes.Options{Name: "views", Prefix: prefix, Stripes: 2, SealInterval: -1})
	require.NoError(t, err)
	defer ctr.Close()
	_, err = ctr.Add(t.Context(), stripes.Event{ID: "a", Time: time.Now()}, 1)
	require.NoError(t, err)
	layout := prefix + "{views}:layout"
	before, err := c.HGetAll(t.Context(), layout).Result()
	require.NoError(t, err)

	conn := []string{"--addr", s.Addr(), "--prefix", prefix}
	for name, tc := range map[string]struct {
		stdin string
		args  []string
		want  string
		tail  []string
	}{
		"unknown counter":    {"", []string{"stripes", "sum", "views", "nosuch"}, `no counter "nosuch"`, nil},
		"unknown for resize": {"", []string{"stripes", "resize", "nosuch", "4", "--yes"}, `no counter "nosuch"`, nil},
		"wrong prefix":       {"", []string{"stripes", "status", "views"}, `no counter "views" under prefix "other:"`, []string{"--prefix", "other:"}},
		"zero stripes":       {"", []string{"stripes", "resize", "views", "0", "--yes"}, "STRIPES must be 1..4096", nil},
		"too many stripes":   {"", []string{"stripes", "resize", "views", "5000", "--yes"}, "STRIPES must be 1..4096", nil},
		"declined":           {"no\n", []string{"stripes", "resize", "views", "4"}, "not resized", nil},
		"braces in name":     {"", []string{"stripes", "status", "a{b}"}, "without '{' or '}'", nil},
		"no name":            {"", []string{"stripes", "seal"}, "stripes seal NAME", nil},
		"unknown sub":        {"", []string{"stripes", "grow"}, `unknown subcommand "grow"`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, tc.stdin, nil, append(append(tc.args, conn...), tc.tail...)...)
			require.Equal(t, 2, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		})
	}
	after, err := c.HGetAll(t.Context(), layout).Result()
	require.NoError(t, err)
	require.Equal(t, before, after, "the layout is unchanged")
	n, err := c.Exists(t.Context(), prefix+"{nosuch}:layout").Result()
	require.NoError(t, err)
	require.Zero(t, n, "an unknown counter was not created")
}

// TestStripesStatusRendering checks the layout as a person sees it.
func TestStripesStatusRendering(t *testing.T) {
	st := counterStatus{Name: "views", LayoutKey: "stripes:{views}:layout", Version: 5, Base: 30, Sum: 45,
		DedupWindow: "10m0s", DedupSlices: 4, DedupBits: 63, Generations: []genStatus{
			{Gen: 1, Stripes: 2, State: "folded", Folded: 30, Total: 30, Stripe: []stripeStatus{{Index: 0, Value: 20, Sealed: true}, {Index: 1, Value: 10, Sealed: true}}},
			{Gen: 2, Stripes: 2, State: "open", Total: 15, Stripe: []stripeStatus{{Index: 0, Value: 15}, {Index: 1, Missing: true}}},
		}}
	want := `counter "views"  sum 45  (base 30 from sealed generations)
layout stripes:{views}:layout version 5, dedup window 10m0s in 4 slices, 63-bit records

generation 1: folded, 2 stripe(s), total 30 (folded 30)
  stripe 0              20  ████████████████████  sealed
  stripe 1              10  ██████████··········  sealed

generation 2: open, 2 stripe(s), total 15
  stripe 0              15  ████████████████████
  stripe 1               0  ····················  MISSING (data loss?)
`
	require.Equal(t, want, renderStripes(st))
}

// TestStripesReadsAHomeRecord: a counter created with one stripe lives in its layout hash
// until its first resize (a home record); status, sum, resize and seal read and change it as
// they do a counter with a document, before and after the resize.
func TestStripesReadsAHomeRecord(t *testing.T) {
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
			prefix := celebritytest.Prefix(t) + "stripes:"
			conn = append(conn, "--prefix", prefix)
			const name = "post:9:views"
			ctr, err := stripes.New(c, stripes.Options{Name: name, Prefix: prefix, Stripes: 1,
				DedupWindow: 2 * time.Second, SealInterval: -1})
			require.NoError(t, err)
			defer ctr.Close()
			for i := range 5 {
				_, err := ctr.Add(t.Context(), stripes.Event{ID: fmt.Sprint("view-", i), Time: time.Now()}, 1)
				require.NoError(t, err)
			}
			st := stripesStatus(t, conn, name)
			require.Equal(t, int64(5), st.Sum)
			require.Equal(t, "2s", st.DedupWindow, "the recorded window, not the default")
			require.Len(t, st.Generations, 1)
			require.Equal(t, []stripeStatus{{Index: 0, Key: st.LayoutKey, Value: 5}}, st.Generations[0].Stripe,
				"the one stripe lives in the layout hash")

			r := cli(t, "", nil, append([]string{"stripes", "resize", name, "3", "--yes", "--json"}, conn...)...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Equal(t, float64(2), decodeJSON[map[string]any](t, r.stdout)["gen"])
			for i := 5; i < 9; i++ {
				_, err := ctr.Add(t.Context(), stripes.Event{ID: fmt.Sprint("view-", i), Time: time.Now()}, 1)
				require.NoError(t, err)
			}
			st = stripesStatus(t, conn, name)
			require.Equal(t, int64(9), st.Sum)
			require.Len(t, st.Generations, 2)
			require.Equal(t, "closed", st.Generations[0].State)
			require.Equal(t, st.LayoutKey, st.Generations[0].Stripe[0].Key)
			require.Equal(t, 3, st.Generations[1].Stripes)

			require.Eventually(t, func() bool {
				r = cli(t, "", nil, append([]string{"stripes", "seal", name, "--json"}, conn...)...)
				require.Equal(t, 0, r.code, r.stderr)
				return len(decodeJSON[struct{ Folded []uint64 }](t, r.stdout).Folded) == 1
			}, 30*time.Second, 200*time.Millisecond)
			st = stripesStatus(t, conn, name)
			require.Equal(t, int64(9), st.Sum)
			require.Equal(t, "folded", st.Generations[0].State)
			n, err := ctr.Sum(t.Context())
			require.NoError(t, err)
			require.Equal(t, int64(9), n, "the library agrees after the CLI's seal")
		})
	}
}
