// Package celebritytest starts real redis-server processes for tests: standalone servers and
// Redis Clusters (1 to 16 masters, optionally with a replica each) that a test can
// kill, restart from their append-only file, pause, fail over, restore to an earlier point,
// and reach as a user limited by ACL rules. Its sub-package faults puts a go-redis Dialer
// between a client and its servers that drops a reply after the command ran, adds latency
// or blackholes a server. The project's own tests use both; a host uses them to test its own
// code against the same failures:
//
//	func TestMain(m *testing.M) { celebritytest.Main(m) }
//
//	func TestRetryAfterLostReply(t *testing.T) {
//		cl := celebritytest.NewCluster(t, celebritytest.ClusterOptions{Masters: 3})
//		inj := faults.New()
//		c := cl.Client(t, func(o *redis.ClusterOptions) { o.Dialer = inj.Dialer(nil); o.MaxRetries = -1 })
//		inj.DropReply(faults.Match{Command: "EVALSHA"}, 1) // the next script runs, its reply is lost
//		// ... call the code under test through c, retry, check it acted once ...
//	}
//
// A test binary shares one fleet: [Standalone] and [Shards] hand out standalone servers and
// [SharedCluster] a Redis Cluster of three masters, each started on first use and stopped by
// [Main] when the binary's tests end. Tests that break servers on purpose take their own
// with [NewServer] or [NewCluster]; those stop at the end of the test. [Prefix] gives the
// test its own key prefix (the same on every call in one test; [NewPrefix] a new one per
// call, for components that must not share keys), so tests sharing a server can run in
// parallel without flushing each other. The package example shows a host's test of its own
// script with a lost reply, on a standalone server and a cluster.
//
// What a test can do to a server: [Server.Kill] (SIGKILL, as a crash), [Server.Restart]
// (loads its AOF with ServerOptions.AOF), [Server.Pause] and [Server.Resume] (SIGSTOP and
// SIGCONT: connections stay open, nothing is answered), [Server.Snapshot] and
// [Server.RestoreSnapshot] (back to an earlier point, as from an old backup),
// [Cluster.Failover] and [Cluster.ForceFailover] (promote a replica), and [Server.User] or
// [Cluster.User] (a client of an ACL user holding only the given rules). A test that breaks
// servers takes seconds: [Long] marks it, and go test -short skips it.
//
// A long test that repeats its scenario runs less of it by default and all of it in a full
// run, CELEBRITY_FULL=1 ([FullEnv], [Full]): [Rounds] picks its number of rounds, and
// [Spread] runs each case of a table on one topology (standalone or cluster, alternating)
// instead of both. Every case and fault state still runs in every run, with the same checks:
//
//	for round := range celebritytest.Rounds(40, 5) { ... }
//
//	CELEBRITY_FULL=1 go test -race ./...
//
// A test binary can run every test as a user limited to a package's ACL rule, so that a
// command or key the rule does not grant fails the suite: TestMain registers the rule with
// [RegisterRule] and the environment variable CELEBRITYTEST_ACL ([LimitedEnv]) names it for
// a run. The clients the kit hands out then authenticate as that user, on every server the
// kit starts; a test's own administration (FLUSHALL, CONFIG SET, DEBUG) goes through
// [Server.AdminClient] or [Cluster.AdminClient], which keep the default user:
//
//	func TestMain(m *testing.M) {
//		celebritytest.RegisterRule("escrow", func(prefix string) []string {
//			return escrow.ACLRule(escrow.PoolOptions{Prefix: prefix})
//		})
//		celebritytest.Main(m)
//	}
//
//	CELEBRITYTEST_ACL=escrow go test ./...
//
// Servers listen on free loopback ports and keep their files in a folder under the
// temporary directory (TMPDIR). Every process is started with a parent-death signal, so a
// test binary that panics or times out does not leave servers running; folders left by such
// a binary are removed by the next one.
//
// The binary is redis-server from PATH, or the path in REDIS_SERVER: any executable that
// takes redis-server's command-line options and keeps its process ID (a shell script ending
// in exec works), so Redis 7 and 8 and Valkey 8 all serve. When it is missing or cannot
// start, the test is skipped with a message saying how to install it, except when the CI
// environment variable is set: there it fails.
package celebritytest
