package hotkeys_test

import (
	"bufio"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// getCalls returns cmdstat_get calls from INFO commandstats of one server.
func getCalls(t testing.TB, ctx context.Context, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "cmdstat_get:calls=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		require.NoError(t, err)
		return n
	}
	return 0 // no GET served yet
}

// TestClusterSkewMatchesServerCommandStats sends GETs with one celebrity key through a
// ClusterClient, observing each, and compares the detector's per-master rates and skew
// factor with the ones computed from INFO commandstats deltas on the masters.
func TestClusterSkewMatchesServerCommandStats(t *testing.T) {
	ctx := t.Context()
	cl := celebritytest.SharedCluster(t)
	cc := cl.Client(t)
	cs, err := hotkeys.NewClusterShards(ctx, cc)
	require.NoError(t, err)

	masters := map[string]*redis.Client{}
	var addrs []string
	for _, m := range cl.Masters() {
		masters[m.Addr()] = m.AdminClient(t) // INFO is the administrator's
		addrs = append(addrs, m.Addr())
	}
	slices.Sort(addrs)
	require.Equal(t, addrs, cs.Masters(), "the slot map names the cluster's masters")

	clk := testkit.NewClock(clockStart)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate:   1.0 / 8,
		EvalInterval: -1,
		Clock:        clk.Now,
		Rand:         (&lockedRand{r: rand.New(rand.NewPCG(3, 4))}).Uint64,
		Shard:        cs.Shard,
		AllShards:    cs.Masters,
	})
	require.NoError(t, err)
	defer d.Close()

	before := map[string]int64{}
	for a, c := range masters {
		before[a] = getCalls(t, ctx, c)
	}

	prefix := celebritytest.NewPrefix(t)
	celeb := prefix + "celebrity"
	host := cl.AdminClient(t) // the host's traffic, which the detector observes
	const requests, batch = 64_000, 1000
	const elapsed = 8 * time.Second
	rng := rand.New(rand.NewPCG(5, 6))
	for range requests / batch {
		cmds, err := host.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range batch {
				key := celeb
				if i%2 == 1 { // half the traffic on one key, half spread over 10,000
					key = prefix + "k:" + strconv.Itoa(rng.IntN(10_000))
				}
				d.Observe(key)
				p.Get(ctx, key)
			}
			return nil
		})
		if !errors.Is(err, redis.Nil) {
			require.NoError(t, err)
		}
		for _, c := range cmds {
			if err := c.Err(); !errors.Is(err, redis.Nil) {
				require.NoError(t, err)
			}
		}
		clk.Advance(elapsed / (requests / batch))
	}

	delta := map[string]float64{}
	var total, peak float64
	for a, c := range masters {
		delta[a] = float64(getCalls(t, ctx, c) - before[a])
		total += delta[a]
		peak = max(peak, delta[a])
	}
	require.Equal(t, float64(requests), total, "the masters served exactly our GETs")
	wantSkew := peak / (total / float64(len(masters)))

	sv, err := d.ShardView()
	require.NoError(t, err)
	require.Len(t, sv.Shards, 3)
	require.Equal(t, cl.MasterOf(celeb).Addr(), sv.Shards[0].Shard, "the celebrity's master is the hottest")
	for _, s := range sv.Shards {
		want := delta[s.Shard] / elapsed.Seconds()
		t.Logf("master %s: estimated %.0f GET/s, commandstats %.0f GET/s", s.Shard, s.Rate, want)
		require.InEpsilon(t, want, s.Rate, 0.10, "per-node rate of %s", s.Shard)
	}
	t.Logf("skew: estimated %.3f, commandstats %.3f", sv.Skew, wantSkew)
	require.InEpsilon(t, wantSkew, sv.Skew, 0.10)
	require.Greater(t, wantSkew, 1.8, "one celebrity at half the traffic skews three masters")

	top, err := d.Top(1)
	require.NoError(t, err)
	require.Equal(t, celeb, top[0].Key)
	require.InDelta(t, 0.5, top[0].Share, 0.05)
}
