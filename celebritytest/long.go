package celebritytest

import (
	"os"
	"testing"
)

// Long marks t as a long test: a fault, failover or load test that takes seconds. Under
// go test -short it is skipped, and says so. A host's suite can run its quick tests on every
// change and its long ones less often; this project's CI runs every test, long ones
// included, with the race detector on the default server, and runs its version matrix (the
// other servers and Go releases) with -short. A long test that repeats its scenario (rounds,
// iterations, every case on two topologies) repeats less unless [Full] says otherwise.
func Long(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("a long test (fault, failover or load): skipped under -short")
	}
}

// FullEnv is the environment variable that asks for full runs: with FullEnv=1, [Full]
// reports true, the long tests run at their full repetition, and the project's scripts run
// the long tests on every server of the version matrix and in the least-privilege runs.
const FullEnv = "CELEBRITY_FULL"

// Full reports whether this run is a full one: FullEnv is set to 1. A long test then runs
// every round, iteration and case on every topology it knows; otherwise (quick mode, the
// default) it runs fewer repetitions, but still every fault state and case at least once, and
// asserts the same. [Rounds] and [Spread] cover the common shapes. Full reads the
// environment on every call; it is safe for concurrent use.
func Full() bool {
	return os.Getenv(FullEnv) == "1"
}

// Rounds returns full under [Full] and quick otherwise: the number of rounds, iterations or
// events of a long test that repeats one scenario. quick should still reach every state the
// scenario passes through.
func Rounds(full, quick int) int {
	if Full() {
		return full
	}
	return quick
}

// Spread reports whether case i of a test's table runs on variant k of n (a topology: the
// standalone server k = 0 and the cluster k = 1, for n = 2). Under [Full] every case runs on
// every variant. Otherwise case i runs on variant i%n alone: every case still runs once, and
// each variant takes every n-th case, so a table whose neighbouring cases differ in one
// dimension puts both values of it on every variant. The choice is fixed, so that a failure
// reruns as it failed.
func Spread(i, k, n int) bool {
	return Full() || i%n == k
}
