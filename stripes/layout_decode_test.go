package stripes

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// decodeLayout reads a layout hash without Redis: each generation's state follows the
// folded fields and the pending flag, a generation becomes closed once a later one is open
// (not while it is pending), and it is sealable one window plus one slice after its latest
// stripe boundary.
func TestDecodeLayoutStatesWithoutRedis(t *testing.T) {
	ks := keys{prefix: "p:", name: "views"}
	m := map[string]string{
		"ver": "7", "base": "40", "pruned": "2", "folded:3": "40",
		"doc": `{"gens":[` +
			`{"g":3,"n":1,"start":1000,"tags":["a"],"ends":[2000]},` +
			`{"g":4,"n":2,"start":2000,"tags":["b","c"],"ends":[3000,3500]},` +
			`{"g":5,"n":1,"start":3000,"tags":["d"]},` +
			`{"g":6,"n":1,"start":4000,"tags":["e"],"pending":true}],` +
			`"dedup":{"window_ms":60000,"slices":4,"bits":63}}`,
	}
	lo, err := decodeLayout(ks, m)
	require.NoError(t, err)
	require.Equal(t, uint64(7), lo.Version)
	require.Equal(t, int64(40), lo.Base)
	require.Equal(t, uint64(2), lo.PrunedThrough)
	require.Equal(t, time.Minute, lo.DedupWindow)
	require.Equal(t, "p:{views}:layout", lo.Key)
	var states []GenState
	for _, g := range lo.Generations {
		states = append(states, g.State)
	}
	require.Equal(t, []GenState{GenFolded, GenClosed, GenOpen, GenPending}, states)
	require.Equal(t, int64(40), lo.Generations[0].Folded)
	require.Equal(t, time.UnixMilli(3500+60000+15000).UTC(), lo.Generations[1].SealableAt)
	require.True(t, lo.Generations[2].SealableAt.IsZero(), "no boundary yet")
	require.Equal(t, "p:{c}:views:4:1", lo.Generations[1].Values[1].Key)

	g := lo.Generations[1]
	fillStripe(&g, &g.Values[0], []any{"5", nil, "3000"})
	fillStripe(&g, &g.Values[1], []any{nil, nil, nil})
	require.Equal(t, int64(5), g.Total)
	require.Equal(t, time.UnixMilli(3000).UTC(), g.Values[0].End)
	require.True(t, g.Values[1].Missing, "a stripe of a closed generation must exist")
	p := lo.Generations[3]
	fillStripe(&p, &p.Values[0], []any{nil, nil, nil})
	require.False(t, p.Values[0].Missing, "a pending generation's stripes may not exist yet")

	for _, bad := range []map[string]string{
		{"ver": "1", "doc": "{"},
		{"ver": "x", "doc": `{"gens":[{"g":1,"n":1,"tags":["a"]}]}`},
		{"ver": "1", "doc": `{"gens":[{"g":1,"n":2,"tags":["a"]}]}`},
	} {
		_, err := decodeLayout(ks, bad)
		require.ErrorIs(t, err, ErrLayout, bad)
	}
}

// planSeal picks, without Redis, the folded generations left without a TTL and the closed
// generations whose latest boundary is grace old, oldest first.
func TestPlanSealWithoutRedis(t *testing.T) {
	gen := func(g uint64, ends ...int64) genDoc {
		return genDoc{Gen: g, Stripes: max(len(ends), 1), Ends: ends}
	}
	l := &layout{
		doc:      layoutDoc{Gens: []genDoc{gen(1, 10), gen(2, 10), gen(3, 100, 500), gen(4, 100, 1000), gen(5)}},
		folded:   map[uint64]int64{1: 3, 2: 4},
		expiring: map[uint64]int64{2: 1},
	}
	var got []string
	for _, st := range planSeal(l, 1000, 500) {
		got = append(got, fmt.Sprintf("%d:%v", st.g.Gen, st.expireOnly))
	}
	// 1: folded, no TTL yet; 2: folded and expiring; 3: latest end 500 + 500 <= 1000;
	// 4: latest end 1000 + 500 > 1000; 5: open.
	require.Equal(t, []string{"1:true", "3:false"}, got)
}

// planAdd routes an event through a cached layout without Redis: by time to the generation
// whose stripe boundary is after it, by stamp to the generation named, refusing a folded
// generation, and leaving to Add what the layout cannot route.
func TestPlanAddRoutesWithoutRedis(t *testing.T) {
	o, err := Options{Name: "views", Stripes: 1}.withDefaults()
	require.NoError(t, err)
	c := &Counter{opts: o, keys: keys{prefix: o.Prefix, name: o.Name}}
	l := &layout{doc: layoutDoc{Gens: []genDoc{
		{Gen: 1, Stripes: 1, Tags: []string{"a"}, Ends: []int64{1000}},
		{Gen: 2, Stripes: 1, Start: 1000, Tags: []string{"b"}},
	}}, folded: map[uint64]int64{}}
	at := func(ms int64, gen uint64) Event { return Event{ID: "e", Time: time.UnixMilli(ms), Gen: gen} }

	call, res, ok, err := c.planAdd(l, at(999, 0))
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, uint64(1), call.g.Gen, "before the boundary: the closing generation")
	require.Equal(t, Result{Gen: 1, Stripe: 0}, res)
	call, _, ok, err = c.planAdd(l, at(1000, 0))
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, uint64(2), call.g.Gen, "at the boundary: the next generation")
	call, _, ok, _ = c.planAdd(l, at(5000, 1))
	require.True(t, ok)
	require.Equal(t, uint64(1), call.g.Gen, "a stamped event keeps its generation")

	_, _, ok, _ = c.planAdd(l, at(5000, 3))
	require.False(t, ok, "an unknown generation is Add's to settle")

	l.folded[1] = 10
	_, _, ok, err = c.planAdd(l, at(999, 0))
	require.True(t, ok)
	require.ErrorIs(t, err, ErrTooOld)
}
