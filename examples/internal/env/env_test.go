package env

import (
	"context"
	"fmt"
	"testing"
)

// The embedded default with three nodes routes each key to the server owning its slot, and
// NodeOps sees the commands on each server.
func TestEmbeddedClusterSpreadsKeysOverItsServers(t *testing.T) {
	t.Setenv("REDIS_ADDR", "")
	t.Setenv("REDIS_CLUSTER_ADDRS", "")
	ctx := context.Background()
	tg, err := Connect(ctx, Options{EmbeddedNodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	if tg.Kind != "embedded" || tg.Cluster() == nil || len(tg.Masters()) != 3 {
		t.Fatalf("got kind %q, cluster %v, %d masters; want an embedded 3-node cluster", tg.Kind, tg.Cluster() != nil, len(tg.Masters()))
	}
	set := func() {
		for i := range 300 {
			if err := tg.Client.Set(ctx, fmt.Sprintf("k%d", i), "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	set() // opens the connections: the embedded count includes their handshakes
	before, err := tg.NodeOps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set()
	after, err := tg.NodeOps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	skew, per := tg.Skew(before, after)
	var total uint64
	for i, n := range per {
		if n < 50 {
			t.Fatalf("server %d ran %d of 300 SETs; keys are not spread by slot", i, n)
		}
		total += n
	}
	if total != 300 || skew > 1.5 {
		t.Fatalf("total %d, skew %.2f; want 300 commands spread evenly", total, skew)
	}
	// CLUSTER SLOTS answers the client-side map, so slot-aware packages see three masters.
	//lint:ignore SA1019 CLUSTER SLOTS is what the library's slot maps read (internal/slot).
	slots, err := tg.Cluster().ClusterSlots(ctx).Result()
	if err != nil || len(slots) != 3 {
		t.Fatalf("CLUSTER SLOTS = %v, %v; want 3 ranges", slots, err)
	}
}

func TestDataCallsLeavesOutAdminCommands(t *testing.T) {
	n, err := dataCalls("cmdstat_get:calls=3,usec=1\r\ncmdstat_info:calls=9,usec=1\r\ncmdstat_cluster|slots:calls=2,usec=1\r\ncmdstat_evalsha:calls=4,usec=1\r\n")
	if err != nil || n != 7 {
		t.Fatalf("dataCalls = %d, %v; want 7", n, err)
	}
}

func TestShardsOfTheEmbeddedDefaultAreSeparateServers(t *testing.T) {
	t.Setenv("REDIS_ADDR", "")
	t.Setenv("REDIS_CLUSTER_ADDRS", "")
	ctx := context.Background()
	tg, err := Connect(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	sh, _, err := tg.Shards("a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := sh["a"].Set(ctx, "same-key", "on a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := sh["b"].Exists(ctx, "same-key").Result(); err != nil || n != 0 {
		t.Fatalf("shard b sees shard a's key (exists=%d, %v)", n, err)
	}
}
