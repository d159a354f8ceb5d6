package hosttest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/hotkeys"
)

// lfuConfig makes OBJECT FREQ count every access (lfu-log-factor 0), so the hottest key is
// known without a probabilistic counter.
var lfuConfig = []string{"maxmemory-policy", "allkeys-lfu", "lfu-log-factor", "0"}

// hotkeysOps runs the Probe's Capabilities, Freq and ScanTop as client (limited to the keys
// under prefix), after host touched prefix+"hot" more often than the other keys; on a
// cluster it also loads the slot map. A ScanTop over the whole keyspace, where host keeps a
// key outside prefix, must fail with NOPERM.
func hotkeysOps(ctx context.Context, client, host redis.UniversalClient, prefix string) error {
	keys := []string{prefix + "hot", prefix + "warm", prefix + "cold"}
	for i, k := range keys {
		if err := host.Set(ctx, k, "v", 0).Err(); err != nil {
			return err
		}
		for range 30 / (i + 1) {
			if err := host.Get(ctx, k).Err(); err != nil {
				return err
			}
		}
	}
	if err := host.Set(ctx, "private:"+prefix, "v", 0).Err(); err != nil {
		return err
	}
	p, err := hotkeys.NewProbe(client)
	if err != nil {
		return err
	}
	caps, err := p.Capabilities(ctx)
	if err != nil {
		return fmt.Errorf("Capabilities: %w", err)
	}
	for _, c := range caps {
		if !c.ObjectFreq {
			return fmt.Errorf("Capabilities: %+v has no OBJECT FREQ", c)
		}
	}
	got, err := p.Freq(ctx, append([]string{prefix + "absent"}, keys...))
	if err != nil || len(got) != len(keys) || got[0].Key != keys[0] {
		return fmt.Errorf("Freq = %+v, %v", got, err)
	}
	top, err := p.ScanTop(ctx, hotkeys.ScanOptions{Match: prefix + "*", K: 2})
	if err != nil || len(top) != 2 || top[0].Key != keys[0] || top[1].Key != keys[1] {
		return fmt.Errorf("ScanTop = %+v, %v", top, err)
	}
	if _, err := p.ScanTop(ctx, hotkeys.ScanOptions{}); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		return fmt.Errorf("ScanTop over every key = %v, want NOPERM for the key outside the rule", err)
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		shards, err := hotkeys.NewClusterShards(ctx, cc)
		if err != nil {
			return err
		}
		if shards.Shard(keys[0]) == "" || len(shards.Masters()) == 0 {
			return fmt.Errorf("ClusterShards: no owner of %q among %v", keys[0], shards.Masters())
		}
	}
	return nil
}

// TestHotkeysProbeWorksUnderLeastPrivilege runs hotkeys' Probe as an ACL user holding
// hotkeys.ACLRule for the keys under a prefix, on a standalone server and a 3-master
// cluster with an LFU policy. hotkeys has no prefix: the keys it looks at are the host's
// own, so a user limited to a library prefix cannot probe them. OBJECT FREQ needs read
// access to each key it is given (NOPERM otherwise); SCAN is not filtered by key patterns
// (it returns every key name of the node), so ScanTop works only with a Match inside the
// readable pattern.
func TestHotkeysProbeWorksUnderLeastPrivilege(t *testing.T) {
	for _, mode := range []string{"standalone", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			prefix := celebritytest.NewPrefix(t)
			rules := hotkeys.ACLRule(hotkeys.ScanOptions{Match: prefix + "*"})
			var client, host redis.UniversalClient
			if mode == "cluster" {
				cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Config: lfuConfig})
				client, host = cl.User(t, "celebrity-hotkeys", rules...), cl.Client(t)
			} else {
				srv := celebritytest.NewServer(t, celebritytest.ServerOptions{Config: lfuConfig})
				client, host = srv.User(t, "celebrity-hotkeys", rules...), srv.Client(t)
			}
			if err := hotkeysOps(t.Context(), client, host, prefix); err != nil {
				t.Fatal(err)
			}
		})
	}
}
