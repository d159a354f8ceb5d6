package hosttest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// routingRule is the ACL rule of routing's two kinds of clients besides the key patterns of
// its prefix P (control: "~P:table" and "~{P:table}*", the guard hashes and migrate's
// journal; shards: "~{P:*") and the control's channel ("&P:table:announce"). Each command is
// called by the Go code or by a script (Redis checks those too). Removing any one of them
// fails this test, except HDEL (a purge of expired idempotency records or tombstones, a
// tenant marked back into its bucket: paths this short test does not reach), SUBSCRIBE
// (refused, a Router learns new tables only by its poll), PING (the kit grants it to every
// user) and EVAL on a server whose script cache already holds the scripts (EVALSHA then
// suffices until the cache is flushed or the server restarts).
var routingRule = map[string][]string{
	// Store.Load reads the table with HMGET; Store.Publish is a script (HGET, HMGET, HSET,
	// PUBLISH); a Router subscribes to the announcements, and go-redis checks a silent
	// subscription with PING.
	"control": {"+evalsha", "+eval", "+hmget", "+hget", "+hset", "+publish", "+subscribe", "+ping"},
	// Every read and write is a script; Shard.Ownership reads the record with HGETALL;
	// Provision checks a tenant's data in its bucket with HSCAN (in a script).
	"shard": {"+evalsha", "+eval", "+exists", "+hdel", "+hexists", "+hget", "+hgetall", "+hmget", "+hscan",
		"+hset", "+xadd", "+xinfo|stream", "+zadd", "+zrangebyscore", "+zrem"},
}

// aclPair returns clients of ACL users holding rules on the control Redis and on the shards
// "a" and "b", and the host's own (unrestricted) clients of the shards. On a standalone
// server the three are separate servers; on the cluster the control and shard "a" share the
// shared cluster and shard "b" is a standalone server.
func aclPair(t *testing.T, mode, pkg, prefix string, rules map[string][]string, shardKeys ...string) (control redis.UniversalClient, shards, host map[string]redis.UniversalClient) {
	t.Helper()
	controlRule := append([]string{"~" + prefix + ":table", "~{" + prefix + ":table}*", "&" + prefix + ":table:announce"}, rules["control"]...)
	shard := append(append([]string{"~{" + prefix + ":*"}, shardKeys...), rules["shard"]...)
	srv := celebritytest.Shards(t, 3)
	name := "celebrity-" + pkg + "-" + mode
	if mode == "cluster" {
		cl := celebritytest.SharedCluster(t)
		return cl.User(t, name+"-control", controlRule...), map[string]redis.UniversalClient{
				"a": cl.User(t, name+"-shard", shard...),
				"b": srv[1].User(t, name+"-shard", shard...),
			}, map[string]redis.UniversalClient{
				"a": cl.Client(t),
				"b": srv[1].Client(t),
			}
	}
	return srv[0].User(t, name+"-control", controlRule...), map[string]redis.UniversalClient{
			"a": srv[1].User(t, name+"-shard", shard...),
			"b": srv[2].User(t, name+"-shard", shard...),
		}, map[string]redis.UniversalClient{
			"a": srv[1].Client(t),
			"b": srv[2].Client(t),
		}
}

// aclPrefix is a routing prefix for the test (no braces, no trailing colon).
func aclPrefix(t *testing.T) string { return strings.TrimSuffix(celebritytest.NewPrefix(t), ":") }

// routingOps publishes a table, provisions it, and runs a Router's writes, replays, reads
// and deletes, then gives a new tenant a unit of its own by an override and writes it through the router that
// learned the new table.
func routingOps(ctx context.Context, control redis.UniversalClient, shards, _ map[string]redis.UniversalClient, prefix string) error {
	store, err := routing.NewStore(control, routing.StoreOptions{Prefix: prefix})
	if err != nil {
		return err
	}
	if err := store.Publish(ctx, routing.EvenTable(1, 16, "a", "b")); err != nil {
		return fmt.Errorf("Publish: %w", err)
	}
	scripters := map[string]routing.ShardClient{}
	for n, c := range shards {
		scripters[n] = c
	}
	r, err := routing.New(control, routing.Options{Shards: scripters, Prefix: prefix})
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.Await(ctx, 1); err != nil {
		return fmt.Errorf("Await: %w", err)
	}
	if _, err := r.Provision(ctx); err != nil {
		return fmt.Errorf("Provision: %w", err)
	}
	tenants := []string{"acme", "globex", "initech", "umbrella"}
	for _, tenant := range tenants {
		res, err := r.Do(ctx, tenant, "put-"+tenant, routing.Put("seat:1", "alice"))
		if err != nil {
			return fmt.Errorf("Do Put %s: %w", tenant, err)
		}
		again, err := r.Do(ctx, tenant, "put-"+tenant, routing.Put("seat:1", "alice"))
		if err != nil || !again.Replayed {
			return fmt.Errorf("Do Put %s replayed = %+v, %v", tenant, again, err)
		}
		if _, err := r.Do(ctx, tenant, "cas-"+tenant, routing.PutIf("seat:1", "bob", res.Version)); err != nil {
			return fmt.Errorf("Do PutIf %s: %w", tenant, err)
		}
		rec, ok, err := r.Get(ctx, tenant, "seat:1")
		if err != nil || !ok || rec.Value != "bob" {
			return fmt.Errorf("Get %s = %+v %v, %v", tenant, rec, ok, err)
		}
		if _, err := r.Do(ctx, tenant, "del-"+tenant, routing.Delete("seat:1")); err != nil {
			return fmt.Errorf("Do Delete %s: %w", tenant, err)
		}
	}
	cur, err := store.Load(ctx)
	if err != nil {
		return fmt.Errorf("Load: %w", err)
	}
	next := cur.Next()
	// A new tenant gets a unit of its own, away from its bucket's shard.
	route, err := r.Route("newco", "seat:1")
	if err != nil {
		return err
	}
	other := map[string]string{"a": "b", "b": "a"}[route.Shard.Name()]
	next.SetOverride("newco", other)
	if err := store.Publish(ctx, next); err != nil {
		return fmt.Errorf("Publish override: %w", err)
	}
	if _, err := r.Await(ctx, next.Generation); err != nil {
		return fmt.Errorf("Await: %w", err)
	}
	if _, err := r.Provision(ctx); err != nil {
		return fmt.Errorf("Provision override: %w", err)
	}
	if _, err := r.Do(ctx, "newco", "put-newco", routing.Put("seat:2", "carol")); err != nil {
		return fmt.Errorf("Do after the override: %w", err)
	}
	if own, _, err := r.Shard(other).Ownership(ctx, routing.TenantUnit("newco")); err != nil || own.State != routing.StateOpen {
		return fmt.Errorf("Ownership = %+v, %v", own, err)
	}
	if st := r.Stats(); st.Installs == 0 {
		return fmt.Errorf("Stats: no table installed: %+v", st)
	}
	return nil
}

// migrateOps moves a bucket with records between the shards with a Coordinator (Migrate,
// Status, Unfinished, Claims, Cleanup after the grace), then moves a cache tenant with its
// keys warmed, rolls it back and finishes it.
func migrateOps(ctx context.Context, control redis.UniversalClient, shards, host map[string]redis.UniversalClient, prefix string) error {
	store, err := routing.NewStore(control, routing.StoreOptions{Prefix: prefix})
	if err != nil {
		return err
	}
	if err := store.Publish(ctx, routing.EvenTable(1, 16, "a", "b")); err != nil {
		return fmt.Errorf("Publish: %w", err)
	}
	scripters := map[string]routing.ShardClient{}
	clients := map[string]migrate.ShardClient{}
	for n, c := range shards {
		scripters[n], clients[n] = c, c
	}
	r, err := routing.New(control, routing.Options{Shards: scripters, Prefix: prefix})
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.Await(ctx, 1); err != nil {
		return fmt.Errorf("Await: %w", err)
	}
	if _, err := r.Provision(ctx); err != nil {
		return fmt.Errorf("Provision: %w", err)
	}
	route, err := r.Route("acme", "seat:1")
	if err != nil {
		return err
	}
	for i := range 20 {
		if _, err := r.Do(ctx, "acme", fmt.Sprintf("op-%d", i), routing.Put(fmt.Sprintf("seat:%d", i), "alice")); err != nil {
			return fmt.Errorf("Do: %w", err)
		}
	}
	if _, err := r.Do(ctx, "acme", "op-del", routing.Delete("seat:0")); err != nil {
		return fmt.Errorf("Do Delete: %w", err)
	}
	var now time.Time
	clock := func() time.Time {
		if now.IsZero() {
			return time.Now()
		}
		return now
	}
	co, err := migrate.New(control, migrate.Options{Shards: clients, Prefix: prefix, BatchSize: 4, Clock: clock})
	if err != nil {
		return err
	}
	target := map[string]string{"a": "b", "b": "a"}[route.Shard.Name()]
	st, err := co.Migrate(ctx, migrate.Spec{ID: "move-acme", Unit: route.Unit, Target: target})
	if err != nil || st.State != migrate.OwnedB || st.Copied == 0 {
		return fmt.Errorf("Migrate = %+v, %v", st, err)
	}
	if _, err := co.Status(ctx, "move-acme"); err != nil {
		return fmt.Errorf("Status: %w", err)
	}
	if _, err := co.Unfinished(ctx); err != nil {
		return fmt.Errorf("Unfinished: %w", err)
	}
	if _, err := co.Claims(ctx, route.Unit); err != nil {
		return fmt.Errorf("Claims: %w", err)
	}
	if _, err := r.Await(ctx, st.FlipGen); err != nil {
		return fmt.Errorf("Await: %w", err)
	}
	if rec, ok, err := r.Get(ctx, "acme", "seat:7"); err != nil || !ok || rec.Value != "alice" {
		return fmt.Errorf("Get after the move = %+v %v, %v", rec, ok, err)
	}
	if _, err := r.Do(ctx, "acme", "op-after", routing.Put("seat:99", "dave")); err != nil {
		return fmt.Errorf("Do after the move: %w", err)
	}
	now = time.Now().Add(time.Hour)
	if st, err := co.Cleanup(ctx, "move-acme"); err != nil || !st.Cleaned {
		return fmt.Errorf("Cleanup = %+v, %v", st, err)
	}

	cache, err := migrate.NewCache(control, migrate.CacheOptions{Shards: map[string]migrate.ShardClient{
		"a": shards["a"], "b": shards["b"]}, Prefix: prefix})
	if err != nil {
		return err
	}
	t, err := store.Load(ctx)
	if err != nil {
		return err
	}
	tenant := "acme-cache"
	src := t.Owner(routing.BucketUnit(routing.BucketOf(tenant, t.Buckets)))
	dst := map[string]string{"a": "b", "b": "a"}[src]
	keys := []string{prefix + ":host:" + tenant + ":home", prefix + ":host:" + tenant + ":menu"}
	for _, k := range keys {
		if err := host[src].Set(ctx, k, "v:"+k, time.Minute).Err(); err != nil {
			return fmt.Errorf("SET %s: %w", k, err)
		}
	}
	cs, err := cache.Move(ctx, migrate.CacheSpec{ID: "cache-move", Tenant: tenant, Target: dst, Keys: keys})
	if err != nil || cs.Warmed != len(keys) {
		return fmt.Errorf("Cache.Move = %+v, %v", cs, err)
	}
	if v, err := host[dst].Get(ctx, keys[0]).Result(); err != nil || v != "v:"+keys[0] {
		return fmt.Errorf("warmed copy = %q, %v", v, err)
	}
	if _, err := cache.Status(ctx, "cache-move"); err != nil {
		return fmt.Errorf("Cache.Status: %w", err)
	}
	if _, err := cache.Rollback(ctx, "cache-move"); err != nil {
		return fmt.Errorf("Cache.Rollback: %w", err)
	}
	if _, err := cache.Move(ctx, migrate.CacheSpec{ID: "cache-move-2", Tenant: tenant, Target: dst, Keys: keys}); err != nil {
		return fmt.Errorf("Cache.Move again: %w", err)
	}
	if _, err := cache.Finish(ctx, "cache-move-2"); err != nil {
		return fmt.Errorf("Cache.Finish: %w", err)
	}
	return nil
}

// TestRoutingAndMigrateWorkUnderLeastPrivilege runs routing's and migrate's main operations
// as ACL users holding only routingRule with its prefix's patterns and migrate's rules, on
// standalone servers and on the cluster.
func TestRoutingAndMigrateWorkUnderLeastPrivilege(t *testing.T) {
	for _, mode := range []string{"standalone", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			t.Run("routing", func(t *testing.T) {
				prefix := aclPrefix(t)
				control, shards, host := aclPair(t, mode, "routing", prefix, routingRule)
				if err := routingOps(t.Context(), control, shards, host, prefix); err != nil {
					t.Fatal(err)
				}
			})
			t.Run("migrate", func(t *testing.T) {
				prefix := aclPrefix(t)
				// migrate's rules, as its ControlACLRule and ShardACLRule state them: routing's
				// plus the journal's commands on the control Redis, and on the shards the copy's
				// and, for a Cache, the warm-up of the host's own keys of the tenant it moves.
				rules := map[string][]string{"control": migrate.ControlACLRule(migrate.CacheOptions{Prefix: prefix}),
					"shard": migrate.ShardACLRule(migrate.CacheOptions{Prefix: prefix, TenantKeys: []string{prefix + ":host:*"}})}
				control, shards, host := aclPair(t, mode, "migrate", prefix, rules)
				if err := migrateOps(t.Context(), control, shards, host, prefix); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
