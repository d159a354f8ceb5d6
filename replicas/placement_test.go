package replicas_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

func TestCopiesLandOnDistinctMasters(t *testing.T) {
	c := celebritytest.SharedCluster(t)
	client := c.Client(t)
	rng := rand.New(rand.NewPCG(7, 11))
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = fmt.Sprintf("post:%d:%x", i, rng.Uint64())
	}
	for _, tc := range []struct {
		copies  int
		perNode int
	}{{3, 1}, {6, 2}} {
		t.Run(fmt.Sprintf("N=%d", tc.copies), func(t *testing.T) {
			r := newReplicator(t, client, replicas.Options{Copies: tc.copies})
			other := newReplicator(t, c.Client(t), replicas.Options{Copies: tc.copies})
			for _, key := range keys {
				ck, err := r.CopyKeys(testkit.Ctx(t), key)
				require.NoError(t, err)
				require.Len(t, ck, tc.copies)
				perMaster := map[string]int{}
				tags := map[string]bool{}
				for _, k := range ck {
					perMaster[c.MasterOf(k).Addr()]++
					tags[slot.Tag(k)] = true
				}
				require.Len(t, tags, tc.copies, "copies of %q must have distinct hash tags: %v", key, ck)
				require.Len(t, perMaster, 3, "copies of %q: %v", key, perMaster)
				for addr, n := range perMaster {
					require.Equal(t, tc.perNode, n, "copies of %q on %s", key, addr)
				}
				// Another instance (another client, same slot map) computes the same slots.
				ok, err := other.CopyKeys(testkit.Ctx(t), key)
				require.NoError(t, err)
				for i := range ck {
					require.Equal(t, slot.Of(ck[i]), slot.Of(ok[i]), "copy %d of %q", i, key)
				}
			}
		})
	}
}

func TestCopiesReallyLiveOnTheirMasters(t *testing.T) {
	c := celebritytest.SharedCluster(t)
	client := c.Client(t)
	key := celebritytest.NewPrefix(t) + "sku:42"
	r := newReplicator(t, client, replicas.Options{Copies: 3, Hot: []string{key}})
	ctx := testkit.Ctx(t)
	require.NoError(t, r.Set(ctx, key, []byte("x"), 1, 0))
	ck, err := r.CopyKeys(ctx, key)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, k := range ck {
		// Ask each master directly: only the owner answers, the others redirect.
		for _, m := range c.Masters() {
			direct := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
			n, err := direct.Exists(ctx, k).Result()
			_ = direct.Close()
			if err == nil && n == 1 {
				seen[m.Addr()] = true
			}
		}
	}
	require.Len(t, seen, 3, "the three copies are stored on three masters")
}

func TestStandaloneCopiesAreDistinctKeys(t *testing.T) {
	s := celebritytest.Standalone(t)
	r := newReplicator(t, s.Client(t), replicas.Options{Copies: replicas.MaxCopies})
	ck, err := r.CopyKeys(testkit.Ctx(t), "tenant:big")
	require.NoError(t, err)
	distinct := map[string]bool{}
	for _, k := range ck {
		require.True(t, strings.HasSuffix(k, "}c:tenant:big"), k)
		distinct[k] = true
	}
	require.Len(t, distinct, replicas.MaxCopies)
}

func TestLeaseKeySharesTheLogicalKeySlot(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	r, err := replicas.New(c, replicas.Options{})
	require.NoError(t, err)
	defer r.Close()
	for _, key := range []string{"a", "user:{42}:profile", "{}x", "weird{", "ü"} {
		require.Equal(t, slot.Of(key), slot.Of(r.LeaseKey(key)), key)
	}
}
