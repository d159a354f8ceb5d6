package script_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/script"
)

func TestMain(m *testing.M) { celebritytest.Main(m) }

// incr returns a script, new to every server (its source names the test), that adds 1 to
// KEYS[1] and returns the new count.
func incr(t testing.TB) *script.Script {
	t.Helper()
	return script.New(fmt.Sprintf("-- %s\nreturn redis.call('INCR', KEYS[1])", celebritytest.NewPrefix(t)))
}

// loadedEverywhere reports, per master behind c, whether s is in its script cache.
func loadedEverywhere(ctx context.Context, t testing.TB, c redis.UniversalClient, s *script.Script) []bool {
	t.Helper()
	var out []bool
	check := func(ctx context.Context, n *redis.Client) error {
		ok, err := n.ScriptExists(ctx, s.Hash()).Result()
		if err == nil {
			out = append(out, ok[0])
		}
		return err
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		var (
			mu    sync.Mutex
			nodes []*redis.Client
		)
		require.NoError(t, cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			nodes = append(nodes, n)
			return nil
		}))
		for _, n := range nodes {
			require.NoError(t, check(ctx, n))
		}
		return out
	}
	require.NoError(t, check(ctx, c.(*redis.Client)))
	return out
}

func TestLoadPutsTheScriptOnEveryMaster(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		s := incr(t)
		require.NotContains(t, loadedEverywhere(t.Context(), t, c, s), true)
		require.NoError(t, script.Load(t.Context(), c, s))
		for _, ok := range loadedEverywhere(t.Context(), t, c, s) {
			require.True(t, ok)
		}
	})
}

func TestRunFallsBackToEval(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		s := incr(t)
		key := celebritytest.NewPrefix(t) + "n"
		n, err := s.Run(t.Context(), c, []string{key}).Int64()
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	})
}

// TestPipelineRunsEveryCallOnce sends calls whose scripts no server has yet, mixed with
// calls of a script every master has: each call runs exactly once (the ones answered
// NOSCRIPT are sent again, the others are not), and the result of each is in its command.
func TestPipelineRunsEveryCallOnce(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := t.Context()
		fresh, loaded := incr(t), incr(t)
		require.NoError(t, script.Load(ctx, c, loaded))
		p := celebritytest.NewPrefix(t)
		var calls []script.Call
		for i := range 12 {
			s := fresh
			if i%3 == 0 {
				s = loaded
			}
			calls = append(calls, script.Call{Script: s, Keys: []string{fmt.Sprintf("%s{%d}", p, i)}})
		}
		cmds, err := script.Pipeline(ctx, c, calls)
		require.NoError(t, err)
		require.Len(t, cmds, len(calls))
		for i, cmd := range cmds {
			n, err := cmd.Int64()
			require.NoError(t, err, "call %d", i)
			require.Equal(t, int64(1), n, "call %d ran more than once", i)
			stored, err := c.Get(ctx, calls[i].Keys[0]).Int64()
			require.NoError(t, err)
			require.Equal(t, int64(1), stored, "call %d", i)
		}
		for _, ok := range loadedEverywhere(ctx, t, c, fresh) {
			require.True(t, ok, "the fresh script is loaded on every master afterwards")
		}
	})
}

func TestPipelineKeepsEachCallsError(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := t.Context()
		p := celebritytest.NewPrefix(t)
		bad := script.New(fmt.Sprintf("-- %s\nreturn redis.error_reply('ERR script: bad argument')", p))
		read := script.New(fmt.Sprintf("-- %s\nreturn redis.call('GET', KEYS[1])", p))
		require.NoError(t, c.Set(ctx, p+"{a}", "v", 0).Err())
		cmds, err := script.Pipeline(ctx, c, []script.Call{
			{Script: read, Keys: []string{p + "{a}"}, ReadOnly: true},
			{Script: bad, Keys: []string{p + "{b}"}},
			{Script: read, Keys: []string{p + "{c}"}, ReadOnly: true},
		})
		require.NoError(t, err)
		v, err := cmds[0].Text()
		require.NoError(t, err)
		require.Equal(t, "v", v)
		require.ErrorContains(t, cmds[1].Err(), "ERR script: bad argument")
		require.ErrorIs(t, cmds[2].Err(), redis.Nil)
	})
}

func TestPipelineOfNothing(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	cmds, err := script.Pipeline(t.Context(), c, nil)
	require.NoError(t, err)
	require.Empty(t, cmds)
}

// TestPipelineWaitRunsEveryCallOnceThenWaits: PipelineWait runs each call once, whether the
// server has the script cached or not (then the calls are sent again with their sources),
// and the WAIT it returns ran after them on the same connection.
func TestPipelineWaitRunsEveryCallOnceThenWaits(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	s := incr(t)
	key := celebritytest.NewPrefix(t) + "n"
	calls := []script.Call{{Script: s, Keys: []string{key}}, {Script: s, Keys: []string{key}}}
	for round, cached := range []bool{false, true} {
		ok, err := c.ScriptExists(t.Context(), s.Hash()).Result()
		require.NoError(t, err)
		require.Equal(t, cached, ok[0])
		cmds, wait := script.PipelineWait(t.Context(), c, calls, 0, 100*time.Millisecond)
		for i, cmd := range cmds {
			n, err := cmd.Int64()
			require.NoError(t, err)
			require.Equal(t, int64(2*round+i+1), n, "round %d call %d", round, i)
		}
		require.NoError(t, wait.Err())
		require.Equal(t, int64(0), wait.Val(), "a server without replicas acknowledges none")
	}
	got, err := c.Get(t.Context(), key).Int64()
	require.NoError(t, err)
	require.Equal(t, int64(4), got)
}
