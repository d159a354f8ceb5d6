package routing_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

func TestMain(m *testing.M) {
	// CELEBRITYTEST_ACL=routing runs every test as a user holding only the package's rule,
	// for a prefix pattern covering the prefixes the tests build with prefix(t).
	celebritytest.RegisterRule("routing", func(p string) []string { return routing.ACLRule(routing.Options{Prefix: p + "*"}) })
	// The runnable examples use two shared standalone servers, one the control Redis and
	// shard "a" (REDIS_ADDR), the other shard "b" (REDIS_SHARD_B_ADDR); the kit stops them at
	// the end.
	shards := celebritytest.Shards(celebritytest.ForMain(), 2)
	os.Setenv("REDIS_ADDR", shards[0].Addr())
	os.Setenv("REDIS_SHARD_B_ADDR", shards[1].Addr())
	celebritytest.Main(m)
}

// prefix returns a key prefix unique to the test.
func prefix(t testing.TB) string {
	return strings.TrimSuffix(celebritytest.NewPrefix(t), ":")
}

// newShard builds a Shard named name over c under prefix p.
func newShard(t testing.TB, name string, c routing.ShardClient, p string, o routing.ShardOptions) *routing.Shard {
	t.Helper()
	o.Prefix = p
	s, err := routing.NewShard(name, c, o)
	require.NoError(t, err)
	return s
}

// open creates unit u's ownership record on s, open at gen.
func open(t testing.TB, s *routing.Shard, u routing.Unit, gen uint64) {
	t.Helper()
	_, err := s.Transition(testkit.Ctx(t), u, routing.Ownership{}, routing.Ownership{Generation: gen, State: routing.StateOpen})
	require.NoError(t, err)
}

// logEntries returns unit u's change log on s.
func logEntries(t testing.TB, c redis.UniversalClient, s *routing.Shard, u routing.Unit) []routingfmt.LogEntry {
	t.Helper()
	msgs, err := celebritytest.AdminOf(t, c).XRange(testkit.Ctx(t), routingfmt.Keys(s.Keys().Tag(u)).Log, "-", "+").Result()
	require.NoError(t, err)
	out := make([]routingfmt.LogEntry, 0, len(msgs))
	for _, m := range msgs {
		e, err := routingfmt.ParseLogEntry(m)
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

func ctxBG() context.Context { return context.Background() }

func isStale(err error) bool { return errors.Is(err, routing.ErrStaleRoute) }
