package celebritytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// LimitedEnv is the environment variable that runs a test binary's Redis tests as a limited
// ACL user. Its value names a rule the binary registered with [RegisterRule] (for example
// CELEBRITYTEST_ACL=escrow). Every server the kit starts then holds the user [LimitedUser]
// with exactly that rule, computed for the prefix [PrefixRoot] (which starts every
// [Prefix]), plus the commands every go-redis client sends on a new connection and, on
// cluster nodes, the ones a cluster client sends to learn the slot map (as [Server.User]
// and [Cluster.User] add). The clients [Server.Client], [Cluster.Client] and [Both] hand
// out authenticate as that user, so a command or key outside the rule fails with NOPERM and
// fails the test. What the kit does itself (forming a cluster, failover, snapshots, ACL
// SETUSER) keeps the default user, and so do the clients of [Server.AdminClient] and
// [Cluster.AdminClient], for a test's own administration (FLUSHALL, CONFIG SET, DEBUG).
// A name that no rule was registered under fails every test that asks for a server, also
// outside CI. Unset or empty (the default), clients use the default user.
const LimitedEnv = "CELEBRITYTEST_ACL"

// LimitedUser is the name of the ACL user of a run under LimitedEnv.
const LimitedUser = "celebritytest-limited"

// PrefixRoot starts every key prefix [Prefix] returns. Under LimitedEnv the registered rule
// is computed for it, so a rule whose key pattern is "~<prefix>*" covers the keys of every
// test that builds its keys under Prefix.
const PrefixRoot = "t"

// limits holds the registered rules and, once the first server started, the rule of the
// run under LimitedEnv. It is part of the binary's fleet state.
var limits struct {
	mu       sync.Mutex
	rules    map[string]func(prefix string) []string
	resolved bool
	rule     []string // nil: clients use the default user
	pass     string
	err      error
}

// RegisterRule makes rule selectable by name through LimitedEnv. rule returns a package's
// ACL rule for a key prefix, as the host would grant it (key and channel patterns and
// commands, such as "~<prefix>*", "+evalsha"): a package's ACLRule for options with that
// prefix.
// Call it from TestMain before any test asks for a server:
//
//	func TestMain(m *testing.M) {
//		celebritytest.RegisterRule("escrow", func(prefix string) []string {
//			return escrow.ACLRule(escrow.PoolOptions{Prefix: prefix})
//		})
//		celebritytest.Main(m)
//	}
//
// It panics when called after the first server started, since that server's user was
// already decided.
func RegisterRule(name string, rule func(prefix string) []string) {
	limits.mu.Lock()
	defer limits.mu.Unlock()
	if limits.resolved {
		panic("celebritytest: RegisterRule(" + name + ") after the first server started")
	}
	if limits.rules == nil {
		limits.rules = map[string]func(string) []string{}
	}
	limits.rules[name] = rule
}

// limited returns the rule and password of the run's limited user, nil when LimitedEnv is
// not set, or an error when it names no registered rule.
func limited() (rule []string, pass string, err error) {
	limits.mu.Lock()
	defer limits.mu.Unlock()
	if !limits.resolved {
		limits.resolved = true
		limits.rule, limits.pass, limits.err = resolveLimited(os.Getenv(LimitedEnv), limits.rules)
	}
	return limits.rule, limits.pass, limits.err
}

func resolveLimited(name string, rules map[string]func(string) []string) ([]string, string, error) {
	if name == "" {
		return nil, "", nil
	}
	f, ok := rules[name]
	if !ok {
		names := make([]string, 0, len(rules))
		for n := range rules {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, "", fmt.Errorf("celebritytest: %s=%q names no rule this test binary registered (registered: %s)",
			LimitedEnv, name, strings.Join(names, ", "))
	}
	rule := f(PrefixRoot)
	if len(rule) == 0 {
		return nil, "", fmt.Errorf("celebritytest: the rule %q is empty", name)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return slices.Clone(rule), hex.EncodeToString(b[:]), nil
}

// requireLimits fails t, also outside CI, when LimitedEnv names no registered rule: a run
// meant to prove least privilege must not pass by skipping.
func requireLimits(t testing.TB) {
	t.Helper()
	if _, _, err := limited(); err != nil {
		t.Fatal(err)
	}
}

// Limited reports whether this run's clients authenticate as LimitedUser, and the rule's
// name.
func Limited() (name string, ok bool) {
	rule, _, err := limited()
	if rule == nil || err != nil {
		return "", false
	}
	return os.Getenv(LimitedEnv), true
}

// createLimited creates the run's limited user on s, if there is one. A server forgets its
// ACL users when it restarts, so it runs after every start.
func (s *Server) createLimited() error {
	rule, pass, err := limited()
	if rule == nil || err != nil {
		return err
	}
	all := connectionRules()
	if s.opts.cluster {
		all = append(all, clusterRules()...)
	}
	args := []any{"ACL", "SETUSER", LimitedUser, "reset", "on", ">" + pass}
	for _, r := range append(all, rule...) {
		args = append(args, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer admin.Close()
	if err := admin.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("celebritytest: ACL SETUSER %s on %s: %w", LimitedUser, s.Addr(), err)
	}
	return nil
}

// limitedAuth returns the username and password clients use: the limited user's under
// LimitedEnv, empty (the default user) otherwise.
func limitedAuth() (user, pass string) {
	rule, pass, err := limited()
	if rule == nil || err != nil {
		return "", ""
	}
	return LimitedUser, pass
}

// AdminOf returns a client of the same server or cluster as c (a client the kit handed
// out, for example the one [Both] passes) as the default user, closed when the test ends:
// for what a test does as the administrator (DUMP and RESTORE of a backup, FLUSHALL,
// CONFIG SET, SCRIPT LOAD), which a run under LimitedEnv does not grant c. It has none of
// c's other options (no Dialer: its replies are never dropped).
func AdminOf(t testing.TB, c redis.UniversalClient) redis.UniversalClient {
	t.Helper()
	var admin redis.UniversalClient
	switch c := c.(type) {
	case *redis.Client:
		admin = redis.NewClient(&redis.Options{Addr: c.Options().Addr})
	case *redis.ClusterClient:
		admin = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Options().Addrs})
	default:
		t.Fatalf("celebritytest: AdminOf(%T): want a *redis.Client or a *redis.ClusterClient", c)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return admin
}
