// Package escrow keeps a strict global limit — at most N jobs at once — without ever creating
// capacity, through lost replies, retries, transfers between owners and restarts.
//
// # The problem
//
// "Read the shared remainder, then grant" from several places is how two workers both take the
// last slot. Approximate per-instance limits are fine for soft rate limits, but a strict
// limit needs either one owner that decides every grant, or a partition of the permits into
// disjoint parts each decided by one owner. The package offers both.
//
// [Central] keeps the whole permit set in one ledger (one hash slot); every acquire and
// release is one Lua script there. It is exact and simple, and for a very hot limit that one
// slot is the bottleneck.
//
// [Pool] splits named permits 1..N among owners (A holds 1–50, B 51–100). Each owner grants
// only its own permits, in its own slot, so owners on different cluster masters scale
// independently. Idle permits at A do not help B until a transfer has moved them: that is the
// price of removing coordination from every acquire.
//
// # The guarantee
//
// Every permit is at every instant in exactly one place: free at one owner, held by one job,
// or frozen in one pending transfer. Acquire is idempotent per job ID (a retry, including
// go-redis's own retry after a lost reply, returns the same permit and token) and Release
// frees a permit once. Every grant carries a fencing token; the tokens of one permit only grow,
// also across transfers (the target of a transfer moves its sequence above the source's), so
// a downstream system that keeps the highest token per permit can reject a stale holder.
// After a loss of acknowledged writes, Pool.Reconcile puts the repaired owner's tokens above
// every witnessed one.
//
// A transfer T of k permits from A to B runs in three idempotent steps:
//
//  1. [Pool.Freeze]: A moves k free permits into a record of T in the same atomic step. From
//     this commit on A cannot grant them.
//  2. [Pool.Deliver]: B accepts T exactly once, with the permit list and A's sequence. A
//     duplicate delivery adds nothing. If B has durably refused T, the accept fails.
//  3. [Pool.Complete]: A marks T done.
//
// Capacity leaves A before it appears at B, so the sum never exceeds N. When the reply of a
// step is lost, the step is repeated with the same T, or A asks B about T by delivering it
// again: A never takes permits back because time passed, since B may already be granting
// them. T can be aborted only after B has durably recorded a refusal ([Pool.Cancel]); a
// late delivery of T after that fails. [Pool.Recover], which any process may run, drives
// every frozen transfer to completion or abort by these rules. A network split can leave
// permits frozen (capacity temporarily unusable); it never duplicates them.
// [Pool.Audit] and [Central.Audit] place every permit and return an [AuditReport].
//
// # Fencing against old state
//
// A ledger restored from an old AOF or RDB file, or a master that lost acknowledged writes in
// a failover, could re-grant permits it had given away. Each ledger therefore carries a
// sequence that rises with every grant and transfer step, and every such step copies it to
// a witness key of that owner ([PoolOptions.Witness], [Pool.WitnessKey]) after the ledger
// step and before the caller sees success. Every such step first reads the witness and the
// script refuses, with [ErrFenced], when the ledger's sequence is below it; the ledger then
// stays fenced until [Pool.Reconcile]. A release, which does not read the witness, leaves
// the sequence alone, so a ledger that lost writes cannot climb back to its witness through
// releases and escape the fence. The witness survives what the ledger may lose
// because it lives elsewhere: in a slot of its own (so on a cluster normally on another
// master, which does not fail over together with the ledger's master), or, better, on a
// separate deployment given as PoolOptions.Witness. If ledger and witness are restored
// together from one old snapshot, fencing cannot see it. Init never re-creates a ledger whose
// witness shows it existed.
//
// # Rebalancing, leases
//
// [Rebalancer] is an optional policy object: each pass settles pending transfers, then moves
// a batch of free permits from the idlest owner (at least High free) to the busiest (at most
// Low free) through [Pool.Transfer]; Low+Batch < High gives hysteresis, so a move never
// triggers the move back. The package does not expire holders: a job holds its permit until
// Release. A holder lease (expiry and renewal) would only be a liveness aid, and its safety
// would rest on the downstream checking fencing tokens, since an expired holder may still run.
//
// # Cost
//
// A Central acquire or release is one script call. A Pool acquire is three round trips
// (witness read, the acquire script, witness raise); a release is one. A transfer is three
// steps of three round trips each. [Pool.Audit] is two pipelined round trips.
//
// # Key layout
//
// With prefix P (default "escrow:"), a Central named L uses P{L}:meta, P{L}:free, P{L}:jobs,
// P{L}:held (plus the unused P{L}:out and P{L}:in). A Pool named N gives each owner O six keys
// with the tag {N:O}: meta (hash: seq, fenced, first, last, cap), free (sorted set of permit
// numbers), jobs (hash job -> "permit:token"), held (hash permit -> job), out (hash T ->
// JSON record of an outgoing transfer: state, target, k, seq, permits) and in (hash
// "len(S):S:T" -> JSON record of the incoming transfer T from source S: accepted or refused;
// a transfer ID is unique per source only). The witness of O is the string
// P{N:O:w0}:witness (a different slot from the ledger). Transfer records are kept forever, so
// that any late message about T finds its answer.
//
// # What is assumed of Redis
//
// Strict mode assumes that an acknowledged write is never lost: AOF with appendfsync always,
// and an eviction policy that cannot delete ledger keys (noeviction, or a volatile-* policy,
// since ledger keys have no TTL). [Central.Init] and [Pool.Init] read maxmemory-policy with
// CONFIG GET on every master and refuse an evicting policy with [ErrUnsafeEviction] unless
// AllowEviction is set; they log a warning when AOF is not "always". Managed Redis often
// forbids CONFIG; a server that answers CONFIG GET with an error is tolerated with a
// warning, and the check becomes the operator's duty. Replication is asynchronous: a failover
// can lose acknowledged writes; the package does not call WAIT. On a Pool such a loss puts the
// ledger behind its witness and it is fenced; on a Central it is not detected (there is no
// witness), so a Central needs a durable single master. Reads must reach masters: NewPool
// refuses a cluster client that routes reads to replicas (ReadOnly, RouteByLatency,
// RouteRandomly), since a lagging replica would show an old witness.
//
// # Example
//
//	pool, err := escrow.NewPool(rdb, escrow.PoolOptions{
//		Name: "video", Capacity: 100,
//		Owners: []escrow.Owner{{Name: "eu", First: 1, Last: 50}, {Name: "us", First: 51, Last: 100}},
//	})
//	if err != nil { ... }
//	if err := pool.Init(ctx); err != nil { ... }
//	g, err := pool.Acquire(ctx, "eu", "job-42") // g.Permit, g.Token
//	...
//	err = pool.Release(ctx, "eu", "job-42")
//	err = pool.Transfer(ctx, "us", "eu", 10, "t-2026-11-30-1")
package escrow
