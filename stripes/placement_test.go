package stripes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestStripeOfIsUniformOverMillionRandomIDs(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 11))
	const ids = 1_000_000
	ns := []int{4, 8, 16}
	counts := make([][]int, len(ns))
	for k, n := range ns {
		counts[k] = make([]int, n)
	}
	for range ids {
		h := hashing.Sum64(strconv.FormatUint(rnd.Uint64(), 16))
		for k, n := range ns {
			counts[k][stripeOf(h, n)]++
		}
	}
	for k, n := range ns {
		mean := float64(ids) / float64(n)
		ratio := float64(slices.Max(counts[k])) / mean
		t.Logf("%d stripes: max/mean = %.4f", n, ratio)
		require.LessOrEqual(t, ratio, 1.05, "%d stripes: %v", n, counts[k])
	}
}

func TestStripeOfFollowsTheHashContract(t *testing.T) {
	for _, id := range []string{"", "a", "view-42", "курс-72"} {
		require.Equal(t, int(hashing.Bucket(id, 16)), stripeOf(hashing.Sum64(id), 16), "id %q", id)
	}
}

// threeMasters is the slot map of a cluster whose three masters own equal ranges.
func threeMasters(t testing.TB) *slot.Map {
	t.Helper()
	m, err := slot.FromRanges([]redis.ClusterSlot{
		{Start: 0, End: 5460, Nodes: []redis.ClusterNode{{Addr: "a:1"}}},
		{Start: 5461, End: 10922, Nodes: []redis.ClusterNode{{Addr: "b:1"}}},
		{Start: 10923, End: 16383, Nodes: []redis.ClusterNode{{Addr: "c:1"}}},
	})
	require.NoError(t, err)
	return m
}

func TestPlacementSpreadsStripesEvenly(t *testing.T) {
	m := threeMasters(t)
	for _, tc := range []struct {
		n    int
		want []int // stripes per master, sorted
	}{
		{1, []int{0, 0, 1}},
		{3, []int{1, 1, 1}},
		{16, []int{5, 5, 6}},
		{4096, []int{1365, 1365, 1366}},
	} {
		for gen := uint64(1); gen <= 3; gen++ {
			tags, err := placeOn(m, "views", gen, tc.n)
			require.NoError(t, err)
			per := map[string]int{}
			slots := map[uint16]bool{}
			for _, tag := range tags {
				s := slot.Of("{" + tag + "}x")
				require.False(t, slots[s], "stripes share slot %d", s)
				slots[s] = true
				per[m.Master(s)]++
			}
			got := []int{per["a:1"], per["b:1"], per["c:1"]}
			slices.Sort(got)
			require.Equal(t, tc.want, got, "%d stripes, generation %d", tc.n, gen)
		}
	}
}

func TestPlacementOnClusterFollowsSixFiveFive(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	rc := cl.Client(t)
	c := newCounter(t, rc, Options{Stripes: 16})
	ctx := context.Background()
	m, err := slot.Load(ctx, rc)
	require.NoError(t, err)

	rnd := rand.New(rand.NewPCG(3, 5))
	const events = 16_000
	now := time.Now()
	for range events {
		_, err := c.Add(ctx, Event{ID: fmt.Sprintf("%016x", rnd.Uint64()), Time: now}, 1)
		require.NoError(t, err)
	}
	l := mustLayout(t, c)
	gd := l.gen(1)
	stripesOn := map[string]int{}
	writesOn := map[string]int64{}
	for i, tag := range gd.Tags {
		key := c.keys.stripe(tag, 1, i)
		addr := m.MasterOfKey(key)
		stripesOn[addr]++
		// The stripe physically lives on that master.
		var found bool
		for _, s := range cl.Masters() {
			if s.Addr() == addr {
				v, err := s.Client(t).HGet(ctx, key, "v").Int64()
				require.NoError(t, err)
				writesOn[addr] += v
				found = true
			}
		}
		require.True(t, found, "master %s of stripe %d", addr, i)
	}
	counts := []int{}
	for _, n := range stripesOn {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	require.Equal(t, []int{5, 5, 6}, counts, "16 stripes on 3 masters")
	st := c.Stats()
	require.Len(t, st.StripeWrites, 1)
	var fromStats int
	for _, w := range st.StripeWrites[0].Writes {
		fromStats += int(w)
	}
	require.Equal(t, events, fromStats, "per-stripe write counts add up")
	for addr, n := range stripesOn {
		want := float64(events) * float64(n) / 16
		got := float64(writesOn[addr])
		t.Logf("master %s: %d stripes, %d writes, expected %.0f", addr, n, writesOn[addr], want)
		require.InDelta(t, 1, got/want, 0.05, "writes on %s", addr)
	}

	// Tags are part of the durable layout: a resize places the new generation and leaves
	// the old one where it was.
	_, err = c.Resize(ctx, 8)
	require.NoError(t, err)
	require.Equal(t, gd.Tags, mustLayout(t, c).gen(1).Tags)
}
