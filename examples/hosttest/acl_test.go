package hosttest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/stripes"
)

// leastPrivilege is the ACL rule a host grants its Redis user for one package, besides the
// key pattern of the package's prefix ("~<prefix>*"): the scripting commands and every
// command the package's scripts and Go code call. Each is checked below by running the
// package's operations as a user holding only that rule and the connection commands; a
// host copies the rule into its own ACL SETUSER.
var leastPrivilege = map[string][]string{
	// Scripts, and the commands the scripts and the Go code call.
	"stripes": {"+evalsha", "+eval", "+script|load", "+hgetall", "+hget", "+hset", "+del", "+hincrby",
		"+hmget", "+hsetnx", "+pexpireat", "+sadd", "+scard", "+smembers", "+smismember", "+time"},
	// CONFIG GET is optional: Init checks the durability settings with it and, refused,
	// warns instead.
	"escrow": {"+evalsha", "+eval", "+evalsha_ro", "+eval_ro", "+exists", "+get", "+hdel", "+hexists",
		"+hget", "+hgetall", "+hincrby", "+hmget", "+hset", "+set", "+zadd", "+zcard", "+zrange", "+zrem",
		"+zscore", "+del", "+time", "+zrangebyscore", "+zremrangebyrank", "+zrevrangebyscore", "+config|get"},
}

// TestPackagesWorkUnderLeastPrivilege runs each package's main operations as an ACL user
// holding only its documented rule and its prefix's key pattern, on a standalone server and
// on a cluster: a command outside the rule fails with NOPERM and fails the test.
func TestPackagesWorkUnderLeastPrivilege(t *testing.T) {
	for _, mode := range []string{"standalone", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			user := func(t *testing.T, pkg, prefix string) redis.UniversalClient {
				rules := append([]string{"~" + prefix + "*"}, leastPrivilege[pkg]...)
				name := "celebrity-" + pkg + "-" + mode
				if mode == "cluster" {
					return celebritytest.SharedCluster(t).User(t, name, rules...)
				}
				return celebritytest.Standalone(t).User(t, name, rules...)
			}
			t.Run("stripes", func(t *testing.T) {
				ctx := t.Context()
				prefix := celebritytest.Prefix(t)
				c, err := stripes.New(user(t, "stripes", prefix), stripes.Options{Name: "views", Prefix: prefix, Stripes: 4, SealInterval: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				for _, id := range []string{"a", "b", "a"} {
					if _, err := c.Add(ctx, stripes.Event{ID: id, Time: time.Now()}, 1); err != nil {
						t.Fatalf("Add: %v", err)
					}
				}
				if _, err := c.Resize(ctx, 8); err != nil {
					t.Fatalf("Resize: %v", err)
				}
				sum, err := c.Sum(ctx)
				if err != nil || sum != 2 {
					t.Fatalf("Sum = %d, %v; want 2", sum, err)
				}
			})
			t.Run("escrow", func(t *testing.T) {
				ctx := t.Context()
				prefix := celebritytest.Prefix(t)
				lim, err := escrow.NewCentral(user(t, "escrow", prefix), escrow.CentralOptions{Name: "seats", Capacity: 2, Prefix: prefix, AllowWeakDurability: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := lim.Init(ctx); err != nil {
					t.Fatalf("Init: %v", err)
				}
				if _, err := lim.Acquire(ctx, "job"); err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				if err := lim.Release(ctx, "job"); err != nil {
					t.Fatalf("Release: %v", err)
				}
				rep, err := lim.Audit(ctx)
				if err != nil || !rep.Clean() {
					t.Fatalf("Audit: %v %v", rep, err)
				}
			})
		})
	}
}
