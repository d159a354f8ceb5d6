package hosttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestCacheWorksUnderLeastPrivilege runs a celebrity.Cache's Get, Set, Promote, Delete and
// Demote as an ACL user holding only the rule celebrity.ACLRule returns for its Options.
func TestCacheWorksUnderLeastPrivilege(t *testing.T) {
	for _, mode := range []string{"standalone", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			prefix := celebritytest.NewPrefix(t)
			o := celebrity.Options[string]{Prefix: prefix, Fresh: time.Second, Stale: time.Second}
			client := aclClient(t, mode, "celebrity-cache", celebrity.ACLRule(o)...)
			loads := 0
			c, err := celebrity.New(client, func(_ context.Context, id string) (celebrity.Versioned[string], error) {
				loads++
				return celebrity.Versioned[string]{Value: "v:" + id, Version: 1}, nil
			}, o)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Ready(ctx); err != nil {
				t.Fatalf("Ready: %v", err)
			}
			if v, err := c.Get(ctx, "post"); err != nil || v != "v:post" {
				t.Fatalf("Get = %q, %v", v, err)
			}
			if err := c.Promote(ctx, "post"); err != nil {
				t.Fatalf("Promote: %v", err)
			}
			if err := c.Set(ctx, "post", "v2", 2); err != nil {
				t.Fatalf("Set: %v", err)
			}
			if v, err := c.Get(ctx, "post"); err != nil || v != "v2" {
				t.Fatalf("Get after Set = %q, %v", v, err)
			}
			if err := c.Delete(ctx, "post", 3); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if err := c.Demote(ctx, "post"); err != nil {
				t.Fatalf("Demote: %v", err)
			}
			if st := fmt.Sprint(c.Stats()); st == "" {
				t.Fatal("no stats")
			}
		})
	}
}
