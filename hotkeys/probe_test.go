package hotkeys_test

import (
	"strconv"
	"testing"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestProbeSaysWhenServerHasNoLFU runs on the default policy (noeviction): OBJECT FREQ has
// no counter to read, and the probe says so with ErrUnsupported.
func TestProbeSaysWhenServerHasNoLFU(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := t.Context()
		p, err := hotkeys.NewProbe(c)
		require.NoError(t, err)
		caps, err := p.Capabilities(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, caps)
		for _, nc := range caps {
			require.Equal(t, "noeviction", nc.Policy, nc.Node)
			require.False(t, nc.ObjectFreq, nc.Node)
			require.False(t, nc.Hotkeys, "redis 7 has no HOTKEYS command")
		}

		key := celebritytest.NewPrefix(t) + "k"
		require.NoError(t, celebritytest.AdminOf(t, c).Set(ctx, key, "v", 0).Err()) // the host's write
		_, err = p.Freq(ctx, []string{key})
		require.ErrorIs(t, err, hotkeys.ErrUnsupported)
		var ue *hotkeys.UnsupportedError
		require.ErrorAs(t, err, &ue)
		require.Contains(t, ue.Reason, "LFU")

		_, err = p.ScanTop(ctx, hotkeys.ScanOptions{Match: celebritytest.NewPrefix(t) + "*"})
		require.NoError(t, err, "a scan that finds no key reads no frequency")
		_, err = p.ScanTop(ctx, hotkeys.ScanOptions{Match: key})
		require.ErrorIs(t, err, hotkeys.ErrUnsupported)
	})
}

// TestProbeReadsLFUFrequencies runs on a server started with allkeys-lfu: the key read
// thousands of times has the highest counter, found both by Freq and by ScanTop.
func TestProbeReadsLFUFrequencies(t *testing.T) {
	ctx := t.Context()
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{Config: []string{"maxmemory-policy", "allkeys-lfu"}})
	c := srv.Client(t)
	p, err := hotkeys.NewProbe(c)
	require.NoError(t, err)
	caps, err := p.Capabilities(ctx)
	require.NoError(t, err)
	require.Equal(t, []hotkeys.NodeCapability{{Node: srv.Addr(), Policy: "allkeys-lfu", ObjectFreq: true}}, caps)

	prefix := celebritytest.NewPrefix(t)
	keys := writeAndRead(t, srv.AdminClient(t), prefix)
	got, err := p.Freq(ctx, append(keys, prefix+"missing"))
	require.NoError(t, err)
	require.Len(t, got, len(keys), "missing keys are left out")
	require.Equal(t, prefix+"hot", got[0].Key)
	require.Greater(t, got[0].Freq, got[1].Freq)

	top, err := p.ScanTop(ctx, hotkeys.ScanOptions{Match: prefix + "*", K: 3})
	require.NoError(t, err)
	require.Len(t, top, 3)
	require.Equal(t, prefix+"hot", top[0].Key)
	require.Equal(t, srv.Addr(), top[0].Node)

	_, err = p.ScanTop(ctx, hotkeys.ScanOptions{K: -1})
	require.ErrorIs(t, err, hotkeys.ErrInvalid)
}

// TestProbeScansEveryClusterMaster switches a cluster of its own to allkeys-lfu (the shared
// one must keep its policy for the other tests) and finds the hot key whichever master
// holds it.
func TestProbeScansEveryClusterMaster(t *testing.T) {
	ctx := t.Context()
	cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{})
	for _, m := range cl.Masters() {
		require.NoError(t, m.AdminClient(t).ConfigSet(ctx, "maxmemory-policy", "allkeys-lfu").Err())
	}
	cc := cl.Client(t)
	p, err := hotkeys.NewProbe(cc)
	require.NoError(t, err)
	caps, err := p.Capabilities(ctx)
	require.NoError(t, err)
	require.Len(t, caps, 3)
	for _, nc := range caps {
		require.True(t, nc.ObjectFreq, nc.Node)
	}

	prefix := celebritytest.NewPrefix(t)
	keys := writeAndRead(t, cl.AdminClient(t), prefix)
	got, err := p.Freq(ctx, keys)
	require.NoError(t, err, "OBJECT FREQ is routed to each key's master")
	require.Equal(t, prefix+"hot", got[0].Key)

	top, err := p.ScanTop(ctx, hotkeys.ScanOptions{Match: prefix + "*", K: 1})
	require.NoError(t, err)
	require.Equal(t, prefix+"hot", top[0].Key)
	require.Equal(t, cl.MasterOf(prefix+"hot").Addr(), top[0].Node)
}

// writeAndRead writes a hot key and 30 cold ones, reads the hot one 5000 times and each cold
// one once, and returns the keys: the host's traffic, which c (an admin client) sends.
func writeAndRead(t *testing.T, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx := t.Context()
	keys := []string{prefix + "hot"}
	for i := range 30 {
		keys = append(keys, prefix+"cold:"+strconv.Itoa(i))
	}
	for _, k := range keys {
		require.NoError(t, c.Set(ctx, k, "v", 0).Err())
	}
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range 5000 {
			p.Get(ctx, keys[0])
		}
		for _, k := range keys[1:] {
			p.Get(ctx, k)
		}
		return nil
	})
	require.NoError(t, err)
	return keys
}
