package redisenv

import (
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Shards returns one client per name, each a separate keyspace (package routing names a
// shard per Redis deployment), and a line that says, for a person, where each shard is:
//   - embedded: one more in-process server per shard;
//   - standalone (REDIS_ADDR): databases 1, 2, ... of the server (the target keeps DB 0);
//   - cluster (REDIS_CLUSTER_ADDRS): the first shard is the cluster itself and the others
//     are databases 1, 2, ... of the standalone server in REDIS_ADDR, which must then be
//     set as well (a cluster has only database 0).
//
// The clients are closed by Close.
func (t *Target) Shards(names ...string) (map[string]redis.UniversalClient, string, error) {
	out := map[string]redis.UniversalClient{}
	var where []string
	add := func(n string, c redis.UniversalClient, desc string) {
		t.extra = append(t.extra, c)
		out[n] = c
		where = append(where, n+": "+desc)
	}
	switch t.Kind {
	case Embedded:
		for _, n := range names {
			m, err := t.startEmbedded()
			if err != nil {
				return nil, "", err
			}
			add(n, redis.NewClient(&redis.Options{Addr: m.Addr()}), "embedded server "+m.Addr())
		}
	case Standalone:
		addr := t.Client.(*redis.Client).Options().Addr
		for i, n := range names {
			add(n, redis.NewClient(&redis.Options{Addr: addr, DB: i + 1}), fmt.Sprintf("database %d of %s", i+1, addr))
		}
	default:
		addr := strings.TrimSpace(os.Getenv("REDIS_ADDR"))
		if addr == "" && len(names) > 1 {
			return nil, "", fmt.Errorf("%d shards need separate keyspaces; a cluster has one: "+
				"set REDIS_ADDR to a standalone server as well for the other shards", len(names))
		}
		out[names[0]] = t.Client
		where = append(where, names[0]+": the cluster")
		for i, n := range names[1:] {
			add(n, redis.NewClient(&redis.Options{Addr: addr, DB: i + 1}), fmt.Sprintf("database %d of %s", i+1, addr))
		}
	}
	return out, strings.Join(where, "; "), nil
}
