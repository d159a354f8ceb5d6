package hosttest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/stripes"
)

// leastPrivilege returns the ACL rule a host grants its Redis user for one package whose
// keys live under prefix, as ACL SETUSER arguments: the key pattern of the prefix, the
// scripting commands and every command the package's scripts and Go code call. A package
// exports its rule (escrow.ACLRule, stripes.ACLRule), which equals the one its doc states.
// Each is checked below by running the package's operations as a user holding only that
// rule and the connection commands; a host passes the same rule to its own ACL SETUSER.
var leastPrivilege = map[string]func(prefix string) []string{
	"stripes": func(prefix string) []string { return stripes.ACLRule(stripes.Options{Prefix: prefix}) },
	"escrow":  func(prefix string) []string { return escrow.ACLRule(escrow.PoolOptions{Prefix: prefix}) },
}

// TestPackagesWorkUnderLeastPrivilege runs each package's main operations as an ACL user
// holding only its documented rule and its prefix's key pattern, on a standalone server and
// on a cluster: a command outside the rule fails with NOPERM and fails the test.
func TestPackagesWorkUnderLeastPrivilege(t *testing.T) {
	for _, mode := range []string{"standalone", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			user := func(t *testing.T, pkg, prefix string) redis.UniversalClient {
				rules := leastPrivilege[pkg](prefix)
				name := "celebrity-" + pkg + "-" + mode
				if mode == "cluster" {
					return celebritytest.SharedCluster(t).User(t, name, rules...)
				}
				return celebritytest.Standalone(t).User(t, name, rules...)
			}
			t.Run("stripes", func(t *testing.T) {
				ctx := t.Context()
				prefix := celebritytest.NewPrefix(t)
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
				prefix := celebritytest.NewPrefix(t)
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
