// Package escrow keeps a strict global limit — at most N jobs at once — without ever creating
// capacity, through lost replies, retries, transfers between owners and restarts.
//
//	// rdb is a *redis.ClusterClient (each witness then sits on another master than its
//	// ledger); with a standalone server, give PoolOptions.Witness on another server.
//	pool, err := escrow.NewPool(rdb, escrow.PoolOptions{
//		Name: "video", Capacity: 100,
//		Owners: []escrow.Owner{{Name: "eu", First: 1, Last: 50}, {Name: "us", First: 51, Last: 100}},
//		Lease:  time.Minute, // optional: a dead holder's permit comes back
//	})
//	if err != nil { ... }
//	if err := pool.Init(ctx); err != nil { ... }
//	g, err := pool.Acquire(ctx, "eu", "job-42") // g.Permit, g.Token, g.Expires
//	...                                          // pool.Renew before g.Expires
//	err = pool.Release(ctx, "eu", "job-42")
//	err = pool.Transfer(ctx, "us", "eu", 10, "t-2026-11-30-1")
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
// frees a permit once (a replay of it, also go-redis's after a lost reply, reports the release
// again instead of [ErrNotHeld]). Every grant carries a fencing token; the tokens of one permit only grow,
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
// a failover, could re-grant permits it had given away. Each ledger therefore keeps a log of
// its steps (every grant and transfer step), and a witness keeps a chain of the steps it has
// confirmed ([PoolOptions.Witness], [Pool.WitnessKey]), in a slot on another master.
//
// A step ID is a hash over the previous step's ID, the new sequence, the server's time and
// the step itself, so it commits to the whole history before it: after a restore the ledger
// may reach the same sequence again, never the same step ID. Every script that changes a
// ledger returns the ledger's last steps, and the caller has the witness confirm them before
// it acknowledges anything:
//
//   - The witness appends steps only where they pass through the top of its chain with the
//     same ID, so its chain is one history of the ledger, never two.
//   - If the chain has moved past the caller's step (other callers confirmed newer steps),
//     the caller reads the ledger's log again, after the witness answered. The ledger must
//     still hold the step, and its history must pass through the chain's top (a healthy
//     ledger only moves forward, and the witness covers only steps the ledger had made), so
//     it has lost nothing the chain had confirmed. If the chain lags behind the step, the
//     caller reads the ledger's newer steps and appends them the same way.
//   - Otherwise the ledger's history is not the confirmed one: it was restored to an earlier
//     point. The caller marks it fenced and returns [ErrFenced]; the step is never
//     acknowledged, and the ledger refuses every change until [Pool.Reconcile].
//
// The argument. Take an acknowledged step S (a grant, a freeze, an answer about a transfer)
// and a ledger restored to a point before S. The witness chain holds S's ID: S was confirmed
// before it was acknowledged. Any later step S' of the restored ledger is on another branch,
// so its ID, and the ID of every step after it, differs from every ID on the chain. For S' to
// be confirmed, its run of steps would have to pass through the chain's top with the same ID,
// which it cannot; and a re-read of the ledger after the witness answered finds the ledger
// below the chain's top, or a history that does not pass through it (S is on the chain, not
// in the restored ledger), or S' no longer in the ledger. So no step of the restored ledger is acknowledged, whenever the caller read
// anything: the check never depends on a value read before the ledger state it guards. A
// caller's read of the witness before its script (the chain's top, passed as the minimum
// sequence) is only a shortcut: a ledger already below it is fenced before it changes
// anything. Reconcile repairs the ledger, frees the grants made after its history left the
// confirmed one (never acknowledged), moves its sequence above every witness of the pool and
// starts a new chain at that step.
//
// A release does not go through the witness: it never creates capacity, and the next grant
// of a ledger that lost writes is refused as above. The witness survives what the ledger may
// lose because it lives elsewhere: in a slot half the slot space away from the ledger's (on
// a cluster whose masters own even ranges, always another master), or, better, on a separate
// deployment given as PoolOptions.Witness. If ledger and witness are restored together from
// one old snapshot, or the witness to a point no later than the ledger's, fencing cannot see
// it. Init never re-creates a ledger whose witness shows
// it existed; a Central keeps a marker of its ledger for that ([CentralOptions.Witness]). A Central
// ledger that Init creates is pending (it grants nothing) until the marker names its creation,
// so an Init that read the marker before another process created, used and lost the ledger
// cannot bring it back with every permit free.
// Capacity that no ledger holds any more (a lost ledger, grants a restore forgot) stays out
// until an operator who has confirmed that the old holders are gone calls
// [Pool.RestoreLost] or [Central.RestoreLost]: one explicit call, recorded in the ledger and
// logged, whose grants carry tokens above every older one. The log and the chain keep the last 1024 steps; a caller whose step the ledger
// has dropped from its log by the time it asks (1024 newer steps, or a Reconcile in between)
// gets [ErrUnconfirmed] and nothing is acknowledged.
//
// # Actors and how the tests cover them
//
// The actors are: callers (jobs acquiring and releasing, processes running transfer steps,
// Recover and Reconcile), each of which may pause between what it read and what it writes,
// or die; the ledgers' servers, which may lose acknowledged writes (an AOF restore to an
// earlier point, a failover); the witness; and the network, which may lose a reply after the
// command ran. The package's tests drive real redis-server processes, real AOF copies
// restored with a restart, and a second client whose next command is held back:
//
//   - every mutating call (Acquire, Release, Freeze, Deliver, Complete, Cancel), paused
//     between its witness read and its script while a second actor acts on the same ledger,
//     then resumed against the newer state, and again after the ledger's server was restored
//     to a point before the second actor's step, standalone and on a cluster;
//   - holders that die without Release under leases, and renewals; their permits taken back
//     by a transfer, the Rebalancer and Sweep; holders whose clocks are off the server's by
//     ±60 s and ±2×LeaseSkew whose grant is replayed by the caller or by go-redis after a lost
//     reply; a renewal after the lease lapsed, also on a restored and reconciled ledger; each
//     of them checks after every step that no more permits are held than capacity, from
//     Redis and from the holders' view; and an old holder renewing on a ledger restored to
//     before its permit was reissued;
//   - two RestoreLost calls, one paused between its reading of the pool and its claim or its
//     write, and a Reconcile paused between its reading of the pool and its write across
//     another Reconcile and the grants after it; a lost reply of the witness step that starts
//     a new chain, retried by go-redis;
//   - a Central's Init paused between its read of the marker and its creation, across
//     another process's Init, grants and the ledger's loss;
//   - the witness's server restored alone, and with the ledger's to different points, and a
//     confirmation held back across more than the log's 1024 steps;
//   - strict Init against servers without AOF and witnesses on their ledger's server, on a
//     standalone server and a 3-master cluster;
//   - a target's master restored under a refusal the source acted on, and under an accept
//     whose permits moved on, then Reconcile and Recover;
//   - a ledger restored from an old AOF, and a failover that loses acknowledged writes;
//   - a reply lost after every transfer step, and a process gone after every step, then
//     Recover from another process;
//   - concurrent acquirers and transfers against one audit, and a model-based run of random
//     operations.
//
// # Rebalancing, leases
//
// [Rebalancer] is an optional policy object: each pass settles pending transfers, then moves
// a batch of free permits from the idlest owner (at least High free) to the busiest (at most
// Low free) through [Pool.Transfer]; Low+Batch < High gives hysteresis, so a move never
// triggers the move back.
//
// By default a job holds its permit until Release. With a Lease option every grant carries a
// lease: the holder renews it ([Pool.Renew], [Central.Renew]) before [Grant.Expires], which
// is measured by the caller's clock from before the request: a new grant's lease, or, for a
// replay, the time the ledger had left on the lease, so an offset between the holder's and
// the server's clocks never lets the holder's expiry outlive the ledger's. A permit whose lease ended more
// than LeaseSkew ago by the ledger server's clock is taken back by the next acquire at that
// owner and granted again with a larger fencing token; the old holder's Renew and Release
// then get [ErrNotHeld]. A Renew that comes more than LeaseSkew after the lease ended is
// refused the same way even before anyone took the permit back (a restored ledger may have
// forgotten that it did), and takes it back. A lease is a liveness aid with a stated expiry condition (the holder
// stops by Expires; clocks drift by less than LeaseSkew over a lease); if a holder breaks it
// (a long pause), safety rests on the downstream checking fencing tokens, which refuses the
// old holder. [Pool.Holders] and [Central.Holders] list job, permit, token and expiry, and
// mark a lease that has ended (Expired) and one that ended more than LeaseSkew ago (Lapsed).
//
// A lapsed lease's permit is still counted as held until something takes it back: every
// Acquire, Renew and Freeze at its owner does, before it counts free permits, and
// [Pool.Sweep] and [Central.Sweep] do at every owner without granting anything (the
// [Rebalancer] sweeps at the start of each pass, so a dead holder's permits can move to a
// busy owner). [AuditReport.Lapsed] counts the lapsed permits an audit found.
//
// # Cost
//
// A Central acquire or release is one script call. A Pool acquire is three round trips
// (witness read, the acquire script, witness confirmation); a release is one. A transfer is
// three steps of three round trips each. When concurrent callers confirm out of order, a
// confirmation costs one more round trip (a read of the ledger's log): with 32 callers on
// one owner, an acquire+release pair averaged 4.2 round trips instead of 4. Leases add no
// round trip to an acquire; a Pool's Renew is two (the renewal, then the witness's
// confirmation), a Central's one; a Sweep is one per owner. [Pool.Audit] is two pipelined
// round trips.
//
// # Key layout
//
// With prefix P (default "celebrity:escrow:"; "escrow:" before v0.2.0, see [PreviousDefaultPrefix]), a Central named L uses P{L}:meta (also cid and pending),
// P{L}:free, P{L}:jobs, P{L}:held, P{L}:log, P{L}:leases and P{L}:released (plus the unused
// P{L}:out and P{L}:in), with the contents described below, and the marker of its creation,
// the string P{X}:witness:L:created on the witness client. A Pool named N gives each owner
// O nine keys with the tag {N:O}: meta (hash: seq, fenced, first, last, cap), free (sorted
// set of permit numbers), jobs (hash job -> "permit:token"), held (hash permit -> job), out
// (hash T -> JSON record of an outgoing transfer: state, target, k, seq, permits), in (hash
// "len(S):S:T" -> JSON record of the incoming transfer T from source S: accepted or refused;
// a transfer ID is unique per source only), log (sorted set: step ID scored by the sequence
// after the step, the last 1024 steps), leases (sorted set: job scored by the end of its
// lease in the server's milliseconds, for grants with a lease) and released (sorted set: job
// scored by the server's microseconds at its release, the last 1024 releases, so that a
// replayed release reports the release). The witness chain of O is the sorted set
// P{X}:witness:N:O (step ID scored by sequence, the last 1024 confirmed steps), where X is a
// short tag of the slot half the slot space away from the ledger's. The register that lets
// one Pool.RestoreLost at a time claim the missing permits is the hash P{N:}:restore on the
// witness client. Transfer records are kept forever, so that any late message about T finds
// its answer.
//
// # ACL
//
// The client's user (for the ledgers and for the witnesses) needs key access to the whole of
// the prefix and the scripting commands with every command the scripts and the Go code call
// (Redis checks those too): "~<prefix>* +evalsha +eval +evalsha_ro +eval_ro +exists +get
// +hdel +hexists +hget +hgetall +hincrby +hmget +hset +set +zadd +zcard +zrange +zrem +zscore
// +del +time +zrangebyscore +zremrangebyrank +zrevrangebyscore", and optionally
// "+config|get": Init checks the durability settings with it and, refused, warns instead. No
// channel is used. [ACLRule] returns the rule for a Central's or a Pool's options, as ACL
// SETUSER arguments; the package's tests run once as a user holding only it (CELEBRITYTEST_ACL=escrow).
//
// # What is assumed of Redis
//
// Strict mode assumes that an acknowledged write is never lost: AOF with appendfsync always,
// and an eviction policy that cannot delete ledger keys (noeviction, or a volatile-* policy,
// since ledger keys have no TTL). [Central.Init] and [Pool.Init] read the settings with
// CONFIG GET on every master and refuse an evicting policy with [ErrUnsafeEviction] unless
// AllowEviction is set, and a server without appendonly yes and appendfsync always with
// [ErrWeakDurability] unless AllowWeakDurability is set (then they log a warning to Logger,
// if any). Managed Redis often forbids CONFIG; such a server is refused the same way, since
// its settings cannot be checked, until the host vouches for it with AllowWeakDurability.
// [Pool.Init] also refuses, with [ErrSharedWitness] unless AllowSharedWitness is set, a
// witness that shares a server with its ledger: a standalone client without a separate
// Witness, or a cluster whose slot map puts a witness on its ledger's master. Replication is
// asynchronous: a failover can lose acknowledged writes; the package does not call WAIT. On
// a Pool such a loss puts the ledger behind its witness and it is fenced; on a Central it is
// not detected (there is no witness), so a Central needs a durable single master. Reads must
// reach masters: NewPool refuses a cluster client that routes reads to replicas (ReadOnly,
// RouteByLatency, RouteRandomly), since a lagging replica would show an old witness.
package escrow
