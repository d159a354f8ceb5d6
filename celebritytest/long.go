package celebritytest

import "testing"

// Long marks t as a long test: a fault, failover or load test that takes seconds. Under
// go test -short it is skipped, and says so. A host's suite can run its quick tests on every
// change and its long ones less often; this project's CI runs every test, long ones
// included, with the race detector on the default server, and runs its version matrix (the
// other servers and Go releases) with -short.
func Long(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("a long test (fault, failover or load): skipped under -short")
	}
}
