package hosttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/celebrity-go/celebrity/replicas"
)

// leastPrivilegeMore is leastPrivilege for the packages checked by
// TestMorePackagesWorkUnderLeastPrivilege, given a key prefix (for l1cache, the
// Invalidator's Channel).
var leastPrivilegeMore = map[string]func(prefix string) []string{
	"ratelimit": func(prefix string) []string {
		return ratelimit.ACLRule(ratelimit.Options{Prefix: prefix})
	},
	"replicas": func(prefix string) []string {
		return replicas.ACLRule(replicas.Options{Prefix: prefix})
	},
	// The rule l1cache's doc states: the channel pattern is the Invalidator's Channel;
	// PUBLISH and SUBSCRIBE on a standalone server, SPUBLISH and SSUBSCRIBE on a cluster;
	// PING checks a silent subscription, UNSUBSCRIBE and SUNSUBSCRIBE end it.
	"l1cache": func(channel string) []string {
		return []string{"&" + channel, "+publish", "+subscribe", "+unsubscribe", "+spublish", "+ssubscribe", "+sunsubscribe", "+ping"}
	},
}

// aclClient returns a client of an ACL user holding rules on the shared standalone server
// or the shared cluster.
func aclClient(t *testing.T, mode, name string, rules ...string) redis.UniversalClient {
	t.Helper()
	if mode == "cluster" {
		return celebritytest.SharedCluster(t).User(t, name+"-"+mode, rules...)
	}
	return celebritytest.Standalone(t).User(t, name+"-"+mode, rules...)
}

// invTarget counts what an Invalidator applies.
type invTarget struct{ keys chan string }

func (x invTarget) Invalidate(key string) { x.keys <- key }
func (x invTarget) InvalidateAll()        { x.keys <- "*" }
func (x invTarget) MarkAllStale()         {}

// TestMorePackagesWorkUnderLeastPrivilege is TestPackagesWorkUnderLeastPrivilege for
// ratelimit, replicas and l1cache's Invalidator.
func TestMorePackagesWorkUnderLeastPrivilege(t *testing.T) {
	for _, mode := range []string{"standalone", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			n := 0
			user := func(t *testing.T, pkg, prefix string) redis.UniversalClient {
				rules := leastPrivilegeMore[pkg](prefix)
				n++
				return aclClient(t, mode, fmt.Sprintf("celebrity-%s-%d", pkg, n), rules...)
			}
			t.Run("ratelimit", func(t *testing.T) {
				ctx := t.Context()
				prefix := celebritytest.NewPrefix(t)
				for _, m := range []ratelimit.Mode{ratelimit.Exact, ratelimit.Leased, ratelimit.Approximate} {
					lim, err := ratelimit.New(user(t, "ratelimit", prefix), ratelimit.Options{
						Limit: ratelimit.Limit{Rate: 100, Period: time.Minute}, Mode: m, Slots: 3, Prefix: prefix + m.String() + ":"})
					if err != nil {
						t.Fatal(err)
					}
					for i := range 20 {
						if res, err := lim.Allow(ctx, "user:1"); err != nil || !res.Allowed {
							t.Fatalf("%v Allow %d = %+v, %v", m, i, res, err)
						}
					}
					if err := lim.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
				}
			})
			t.Run("replicas", func(t *testing.T) {
				ctx := t.Context()
				prefix := celebritytest.NewPrefix(t)
				r, err := replicas.New(user(t, "replicas", prefix), replicas.Options{Copies: 3, Prefix: prefix})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if err := r.Refresh(ctx); err != nil {
					t.Fatalf("Refresh: %v", err)
				}
				item, err := r.GetOrLoad(ctx, "post", time.Minute, func(context.Context, string) (replicas.Item, error) {
					return replicas.Item{Value: []byte("v1"), Version: 1}, nil
				})
				if err != nil || string(item.Value) != "v1" {
					t.Fatalf("GetOrLoad = %q, %v", item.Value, err)
				}
				// A second instance calling for a key being loaded waits for the fill (BLPOP on the
				// lease's wake list, which the filler's release pushes to): the load goes on until
				// the second instance is seen waiting.
				loading, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
				go func() {
					_, err := r.GetOrLoad(ctx, "cold", time.Minute, func(context.Context, string) (replicas.Item, error) {
						close(loading)
						<-release
						return replicas.Item{Value: []byte("c"), Version: 1}, nil
					})
					done <- err
				}()
				<-loading
				r2, err := replicas.New(user(t, "replicas", prefix), replicas.Options{Copies: 3, Prefix: prefix})
				if err != nil {
					close(release)
					t.Fatal(err)
				}
				defer r2.Close()
				waited := make(chan error, 1)
				go func() {
					item, err := r2.GetOrLoad(ctx, "cold", time.Minute, func(context.Context, string) (replicas.Item, error) {
						return replicas.Item{}, fmt.Errorf("second load")
					})
					if err == nil && string(item.Value) != "c" {
						err = fmt.Errorf("got %q, want c", item.Value)
					}
					waited <- err
				}()
				for deadline := time.Now().Add(30 * time.Second); r2.Stats().LeaseWaits == 0; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						close(release)
						t.Fatal("the second instance never waited for the fill")
					}
				}
				close(release)
				if err := <-waited; err != nil {
					t.Fatalf("waiting GetOrLoad: %v", err)
				}
				if err := <-done; err != nil {
					t.Fatalf("filling GetOrLoad: %v", err)
				}
				if err := r.Promote(ctx, "post"); err != nil {
					t.Fatalf("Promote: %v", err)
				}
				if err := r.Set(ctx, "post", []byte("v2"), 2, time.Minute); err != nil {
					t.Fatalf("Set: %v", err)
				}
				for range 10 {
					if item, err := r.Get(ctx, "post"); err != nil || string(item.Value) != "v2" {
						t.Fatalf("Get = %q, %v", item.Value, err)
					}
				}
				if err := r.Delete(ctx, "post", 3); err != nil {
					t.Fatalf("Delete: %v", err)
				}
				if err := r.Demote(ctx, "post"); err != nil {
					t.Fatalf("Demote: %v", err)
				}
			})
			t.Run("l1cache", func(t *testing.T) {
				ctx := t.Context()
				channel := celebritytest.NewPrefix(t) + "invalidate"
				a, b := invTarget{make(chan string, 16)}, invTarget{make(chan string, 16)}
				var invs []*l1cache.Invalidator
				for _, target := range []invTarget{a, b} {
					inv, err := l1cache.NewInvalidator(user(t, "l1cache", channel), target,
						l1cache.InvalidatorOptions{Channel: channel})
					if err != nil {
						t.Fatal(err)
					}
					defer inv.Close()
					if err := inv.Ready(ctx); err != nil {
						t.Fatalf("Ready: %v", err)
					}
					invs = append(invs, inv)
				}
				if err := invs[0].Invalidate(ctx, "k"); err != nil {
					t.Fatalf("Invalidate: %v", err)
				}
				if got := <-b.keys; got != "k" {
					t.Fatalf("other instance got %q, want k", got)
				}
				if err := invs[1].InvalidateAll(ctx); err != nil {
					t.Fatalf("InvalidateAll: %v", err)
				}
				for got := range a.keys {
					if got == "*" {
						break
					}
				}
			})
		})
	}
}
