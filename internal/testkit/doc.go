// Package testkit holds the helpers the module's own tests share: a bounded context for a
// test's calls ([Ctx]), a clock that moves only when told ([Clock]) and the parallel
// benchmark loop that reports CPU time per call ([BenchParallel]). It starts no servers:
// the public kit, celebritytest, does that.
//
// It imports only the standard library, so any package of the module can use it from its
// tests, internal (package x) or external (package x_test).
package testkit
