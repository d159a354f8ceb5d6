package celebritytest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// kitRule is the rule this binary registers for its runs under LimitedEnv: GET and SET on
// the keys under a prefix.
const kitRule = "kit"

// runChild runs this test binary's test named run with LimitedEnv set to rule and returns
// its output and error.
func runChild(t *testing.T, run, rule string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), LimitedEnv+"="+rule)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestLimitedRunHoldsClientsToTheRule proves that under LimitedEnv the clients the kit
// hands out are held to the registered rule (on a standalone server, a cluster, and a
// server that restarted and so forgot its users) while AdminClient keeps every right.
func TestLimitedRunHoldsClientsToTheRule(t *testing.T) {
	Standalone(t) // skips (or fails under CI) without redis-server, like every other test
	if _, ok := Limited(); ok {
		t.Skip("runs as the parent of a limited run")
	}
	out, err := runChild(t, "TestLimitedChild", kitRule)
	require.NoError(t, err, out)
	require.Contains(t, out, "--- PASS: TestLimitedChild")
	require.NotContains(t, out, "SKIP")
}

// TestLimitedRunWithAnUnknownRuleFails proves a run naming a rule the binary did not
// register fails instead of skipping or running unlimited.
func TestLimitedRunWithAnUnknownRuleFails(t *testing.T) {
	Standalone(t)
	if _, ok := Limited(); ok {
		t.Skip("runs as the parent of a limited run")
	}
	out, err := runChild(t, "TestStandaloneServesCommands", "no-such-rule")
	require.Error(t, err, out)
	require.Contains(t, out, `CELEBRITYTEST_ACL="no-such-rule" names no rule`)
}

// TestLimitedChild is the child of TestLimitedRunHoldsClientsToTheRule.
func TestLimitedChild(t *testing.T) {
	if name, ok := Limited(); !ok || name != kitRule {
		t.Skip("runs only as the child of TestLimitedRunHoldsClientsToTheRule")
	}
	ctx := t.Context()
	check := func(t *testing.T, c, admin redis.Cmdable) {
		t.Helper()
		key := NewPrefix(t) + "k"
		require.NoError(t, c.Set(ctx, key, "v", 0).Err())
		require.Equal(t, "v", c.Get(ctx, key).Val())
		require.ErrorContains(t, c.Set(ctx, "other:k", "v", 0).Err(), "NOPERM", "a key outside the rule")
		require.ErrorContains(t, c.Del(ctx, key).Err(), "NOPERM", "a command outside the rule")
		require.NoError(t, admin.Del(ctx, key).Err(), "the admin client is limited")
	}
	t.Run("standalone", func(t *testing.T) {
		s := Standalone(t)
		check(t, s.Client(t), s.AdminClient(t))
	})
	t.Run("cluster", func(t *testing.T) {
		cl := SharedCluster(t)
		check(t, cl.Client(t), cl.AdminClient(t))
	})
	t.Run("restarted", func(t *testing.T) {
		s := NewServer(t, ServerOptions{})
		s.Restart(t)
		check(t, s.Client(t), s.AdminClient(t))
	})
	t.Run("both", func(t *testing.T) {
		Both(t, func(t *testing.T, c redis.UniversalClient) {
			check(t, c, AdminOf(t, c))
		})
	})
}
