package celebritytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// connectionRules are the commands a go-redis client sends on every new connection.
func connectionRules() []string { return []string{"+hello", "+auth", "+ping"} }

// clusterRules are the commands a go-redis cluster client sends to learn the slot map, to
// follow a slot being migrated and to learn which commands are read-only.
func clusterRules() []string {
	return []string{"+cluster|slots", "+cluster|shards", "+cluster|nodes", "+readonly", "+asking", "+command"}
}

// User creates the ACL user name on the server with exactly rules (for example
// "~celebrity:stripes:*", "+evalsha", "+script|load") plus the commands a go-redis client
// sends on every new connection (+hello +auth +ping; the CLIENT SETINFO it also sends may
// fail, which go-redis ignores), and returns a client authenticated as it. The user starts
// from "reset": no keys, no channels, no commands, so a command or key outside the rules
// fails with a NOPERM error; that is how a test proves a package works under the least
// privilege its doc grants. The password is random. ACL users are per server and shared by
// every test on it: use a name unique to the test. The user is deleted when the test ends.
func (s *Server) User(t testing.TB, name string, rules ...string) *redis.Client {
	t.Helper()
	pass := setUser(t, []*Server{s}, name, append(connectionRules(), rules...))
	return s.Client(t, func(o *redis.Options) { o.Username, o.Password = name, pass })
}

// User is Server.User for every node of the cluster (ACL users are not propagated between
// nodes), adding the commands a go-redis cluster client sends to learn the slot map, to
// follow a migrating slot and to learn which commands are read-only (+cluster|slots
// +cluster|shards +cluster|nodes +readonly +asking +command), and returns a cluster client
// authenticated as the user.
func (c *Cluster) User(t testing.TB, name string, rules ...string) *redis.ClusterClient {
	t.Helper()
	all := append(append(connectionRules(), clusterRules()...), rules...)
	pass := setUser(t, c.nodes(), name, all)
	return c.Client(t, func(o *redis.ClusterOptions) { o.Username, o.Password = name, pass })
}

// setUser runs ACL SETUSER on every server and deletes the user when the test ends.
func setUser(t testing.TB, servers []*Server, name string, rules []string) string {
	t.Helper()
	var b [16]byte
	_, _ = rand.Read(b[:])
	pass := hex.EncodeToString(b[:])
	args := []any{"ACL", "SETUSER", name, "reset", "on", ">" + pass}
	for _, r := range rules {
		args = append(args, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		admin := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		err := admin.Do(ctx, args...).Err()
		_ = admin.Close()
		if err != nil {
			t.Fatalf("celebritytest: ACL SETUSER %s on %s: %v", name, s.Addr(), err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			if !s.Running() || s.Paused() {
				continue
			}
			admin := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
			_ = admin.Do(ctx, "ACL", "DELUSER", name).Err()
			_ = admin.Close()
		}
	})
	return pass
}
