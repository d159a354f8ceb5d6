// Package celebritytest starts real redis-server processes for the project's tests.
//
// A test binary shares one fleet: [Standalone] and [Shards] hand out standalone servers and
// [SharedCluster] a Redis Cluster of three masters, each started on first use and stopped by
// [Main] when the binary's tests end. Tests that break servers on purpose (kill, restart,
// pause, failover) take their own with [NewServer] or [NewCluster]; those stop at the end of
// the test. [Prefix] gives every test its own key prefix, so tests sharing a server can run
// in parallel without flushing each other.
//
// Servers listen on free loopback ports and keep their files in a temporary folder. Every
// process is started with a parent-death signal, so a test binary that panics or times out
// does not leave servers running; folders left by such a binary are removed by the next one.
//
// The binary is redis-server from PATH, or the path in REDIS_SERVER. When it is missing or
// cannot start, the test is skipped with a message saying how to install it, except when the
// CI environment variable is set: there it fails.
package celebritytest
