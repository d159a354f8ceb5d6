package hotkeys_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/hotkeys"
)

// sweepKeys are keys a mangling encoder would break or merge ("\xff\xfe" and "\ufffd",
// "a\x00b" and "a", "a:b" and "a_b", "{x}" and "x"), the empty key and a 1 MiB key.
var sweepKeys = []string{"", "\xff\xfe", "\ufffd", "a\x00b", "a", "a:b", "a_b", "{", "}", "{x}", "x",
	strings.Repeat("m", 1<<20)}

// TestOddKeysAreCountedApart: the detector counts every key on its own (key i observed i+1
// times) and Top gives each key back byte for byte.
func TestOddKeysAreCountedApart(t *testing.T) {
	d, err := hotkeys.New(hotkeys.Options{EvalInterval: -1, SampleRate: 1, Capacity: 64})
	require.NoError(t, err)
	defer d.Close()
	for i, k := range sweepKeys {
		for range i + 1 {
			d.Observe(k)
		}
	}
	top, err := d.Top(len(sweepKeys))
	require.NoError(t, err)
	got := map[string]float64{}
	for _, kl := range top {
		got[kl.Key] = kl.Count
	}
	require.Len(t, got, len(sweepKeys))
	for i, k := range sweepKeys {
		require.InDelta(t, float64(i+1), got[k], 0.001, "key %.20q", k)
	}
}

// TestProbeReadsOddKeys: OBJECT FREQ of each odd key (on an LFU server) comes back under
// exactly that key, and ScanTop finds them all unchanged.
func TestProbeReadsOddKeys(t *testing.T) {
	ctx := t.Context()
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{Config: []string{"maxmemory-policy", "allkeys-lfu"}})
	admin := srv.AdminClient(t)
	p, err := hotkeys.NewProbe(srv.Client(t))
	require.NoError(t, err)
	prefix := celebritytest.NewPrefix(t)
	var keys []string
	for _, k := range sweepKeys {
		keys = append(keys, prefix+k)
		require.NoError(t, admin.Set(ctx, prefix+k, "v", 0).Err())
	}
	got, err := p.Freq(ctx, keys)
	require.NoError(t, err)
	var names []string
	for _, sk := range got {
		names = append(names, sk.Key)
	}
	require.ElementsMatch(t, keys, names)
	top, err := p.ScanTop(ctx, hotkeys.ScanOptions{Match: prefix + "*", K: len(keys)})
	require.NoError(t, err)
	names = names[:0]
	for _, sk := range top {
		names = append(names, sk.Key)
	}
	require.ElementsMatch(t, keys, names)
}
