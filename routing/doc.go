// Package routing places tenants on shards with versioned route tables, and makes every
// shard refuse writes that were routed by a table it has moved past.
//
//	r, err := routing.New(control, routing.Options{Shards: map[string]routing.ShardClient{
//		"a": shardA, "b": shardB,
//	}})
//	if err != nil { ... }
//	defer r.Close()
//	// Once, at bootstrap: the first table, then its units opened on their shards.
//	err = r.Store().Publish(ctx, routing.EvenTable(1, 1024, "a", "b"))
//	_, err = r.Await(ctx, 1)
//	_, err = r.Provision(ctx)
//	res, err := r.Do(ctx, "acme", "op-7f3a", routing.Put("seat:12", "alice"))
//
// Options are validated once by New; a bad one gives an error wrapping [ErrInvalid] that
// names the field and the allowed range. [Options.Load] turns on the per-tenant load
// summary that tools read with [ReadTenantLoad].
//
// # The problem
//
// hash(tenant) -> shard needs no metadata until one fat tenant has to leave its shard and the
// hash function cannot say so. Placement must be data: versioned, distributed, with
// exceptions. And a route is a protocol, not only a lookup: a client that still holds
// yesterday's table must not be able to write to yesterday's owner.
//
// # Tables, units and generations
//
// A [Table] at generation g maps each of B fixed logical buckets (bucket = xxhash64(tenant)
// % B, the project's stable hash contract; B is fixed for the table's life and is not the
// number of servers) to a shard by ranges, plus overrides (tenant -> shard) and spreads
// (tenant -> K sub-buckets, each on a shard; a record key picks its sub-bucket by the same
// stable hash). A shard is one Redis deployment the host names: a standalone server or a
// whole cluster.
//
// The thing a table assigns, and that moves, is a placement [Unit]: a bucket, an overridden
// tenant, or one sub-bucket of a spread tenant. [Router.Route] resolves (tenant, key) to a
// [Route]: unit, shard, generation, in memory and without allocating.
//
// Tables live in a control Redis ([Store]). Publication is compare-and-set: a table's
// generation must be exactly current + 1, so generations never repeat (moving a unit
// A -> B -> A is generations 10 -> 11 -> 12). A [Router] learns new tables by pub/sub and a
// periodic poll, never installs a table older than the one it has, and coalesces fetches:
// any number of callers that find their route stale at once share one fetch.
//
// # The guarantee: a stale route cannot write
//
// Each shard holds, for every unit it owns or owned, an ownership record (generation, state)
// in the unit's own hash slot. The project's write path for routed data is a small versioned
// record store whose operations ([Shard.Exec], [Shard.Get], [Router.Do]) are Lua scripts
// that, in one atomic step on one slot:
//
//  1. check the ownership record against the route generation the caller carries: a write
//     is admitted only if the unit is open here at a generation <= the caller's, and the
//     tenant was not moved out of the bucket; otherwise [ErrStaleRoute], nothing changed;
//  2. check and record the operation ID: a retried operation returns its first result; the
//     same ID with a different operation is [ErrConflict]. Operation IDs are per tenant
//     (counters such as "confirm-1" are normal): another tenant's use of the same ID, in the
//     same bucket or after a carve-out or fold-back, is another operation;
//  3. apply the versioned change (Put, Delete as a tombstone, optional compare-and-set on
//     the version);
//  4. append a change-log entry for the unit (a stream in the same slot).
//
// [Router.Do] routes, executes, and on ErrStaleRoute waits for a newer table and retries on
// the new owner with the same operation ID, without backoff, within the caller's deadline
// and [Options.MaxRedirects]. A stale table is never used as a fallback: if the control Redis
// is unreachable, the call waits within its deadline and then fails with an error wrapping
// both ErrStaleRoute and the context error. Together with migrate
// (which copies a unit's records, idempotency records and change log to the new owner and
// closes the old one with an exact barrier), a client whose reply was lost before a move
// retries through its stale route and receives its original result from the new owner.
//
// Idempotency records and tombstones are plain records in the unit's slot, so they travel
// with it. They are kept for [DefaultOpRetention] and [DefaultTombstoneRetention] (24h),
// far longer than client retries and a migration; expired ones are removed a few at a time
// by later writes to the same unit. A record's version grows with every Put and Delete and
// never goes backwards: when an expired tombstone is removed, its version raises the unit's
// version floor (vfloor in the ownership record), and a record created later starts above it.
// A migration that wants the same across the move copies vfloor (at least) to the target.
//
// # Key layout
//
// Under a prefix P (Options.Prefix, or "celebrity:routing" for [DefaultPrefix], which ends in
// the ':' below), each unit has a hash tag
//
//	{P:b:<bucket>}            a hash bucket
//	{P:t:<tenant>}            an overridden tenant
//	{P:s:<sub>:<tenant>}      sub-bucket <sub> of a spread tenant
//
// ('%', '{', '}' in tenants are percent-encoded) and these keys on its shard, all in one slot:
//
//	<tag>:own   HASH   ownership: gen, state ("open", "closed", "importing", "cancelled", ...),
//	                   x:<tenant> = generation at which a tenant was moved out of a bucket,
//	                   vfloor = highest version of a tombstone purged here (a new record
//	                   starts above it), mig = migration ID (set by migrate), fence =
//	                   highest fencing epoch that acted on the unit here (see
//	                   TransitionFenced); routing ignores fields it does not know
//	<tag>:rec   HASH   <len(tenant)>:<tenant><key> -> "<version>:l:<value>" | "<version>:t:"
//	<tag>:ops   HASH   op key -> "<fingerprint>:<outcome>:<version>:<field>"
//	<tag>:opx   ZSET   op key, score = expiry (unix ms)
//	<tag>:tomb  ZSET   record field of a tombstone, score = expiry (unix ms)
//	<tag>:log   STREAM change log: k (put|del|noop), f, r, o, op, x, tx (migrate reads it)
//
// The op key is the operation ID scoped by its tenant, "<len(tenant)>:<tenant><op ID>"
// ([OpKey], the form of a record's field). Op records written by versions before the scoping
// are stored under the bare op ID: the write script still finds such a record, for the
// tenant whose field it names only (or for any tenant, in the oldest form that names no
// field), until it expires ([DefaultOpRetention]). Upgrade every writer of a unit together:
// a writer of the older version does not look for scoped records.
//
// In the control Redis: P:table (HASH gen, table JSON) and the channel P:table:announce.
// [Keys] computes the tags and the control keys. The stored forms are the library's own:
// migrate and the celebrity CLI read them through an internal package of the module.
//
// # Bootstrapping
//
// A unit accepts writes only where its ownership record is open. After publishing the first
// table, call [Router.Provision]: it opens every unit on its assigned shard at the table's
// generation, and refuses (creating nothing) if any unit already has a record elsewhere, or
// a record on its own shard that is not open (closed, importing, cancelled, ...), because
// moving an owned unit is a migration, not a table edit. It only creates missing records;
// before opening a new override or spread unit it marks the tenant as moved out of its hash
// bucket, so that clients on an older table cannot keep writing the tenant there. A table
// that newly places a tenant with data in its bucket would hide that data, so the Store a
// Router gives ([Router.Store], or any Store built with StoreOptions.Shards) refuses to
// publish it with [ErrTenantHasData]: it marks the tenant in its bucket first (from that
// instant a client on the older table is refused there), then looks for the tenant's data,
// and clears the mark if it refuses. Such a tenant moves with a tenant migration (package
// migrate's Carve). B and the
// width of a spread never change ([Store.Publish] refuses such a table): unit names depend
// on them.
//
// # Building on the shard side (migrate)
//
// Everything a migration needs is exported:
//
//   - [Shard] wraps one shard's client: [NewShard], [Router.Shard].
//   - [Shard.Ownership] reads a unit's record (and the tenants moved out of a bucket).
//   - [Shard.Transition] changes it by compare-and-set in one script and returns the unit's
//     last change-log ID. When the new state refuses writes (anything but open, e.g.
//     [StateClosed]), that ID is final: every admitted write is at or before it and none can
//     follow. That is the exact write barrier. A retried transition succeeds again with the
//     same ID; a record changed underneath gives [ErrOwnershipChanged]. Generations never go
//     backwards on a shard. [StateImporting] marks a target that is being filled.
//   - [Shard.MarkMoved] does the same for one tenant leaving a bucket (tenant migration).
//   - [Shard.TransitionFenced] and [Shard.MarkMovedFenced] are the same for an actor that
//     carries a fencing epoch (a migration driver): refused with [ErrFenced] in the same
//     script once a higher epoch acted on the unit's record there.
//   - [Keys] names the units' hash tags and the control keys.
//   - [Table.Next], [Table.SetBucket], [Table.SetOverride], [Table.SetSpread], [Table.Owner],
//     [Table.Units] and [Store.Publish] build and publish the flipped table;
//     [Store.PublishGuarded] publishes only while a guard hash in the table's slot
//     ([Keys.ControlTag]) holds given values (migrate: the driver's epoch in its journal).
//
// Tenant names must be valid UTF-8 of 1..[MaxTenantLen] (256) bytes everywhere they enter
// (Router calls, units, tables): a table is stored as JSON text, which cannot carry other
// bytes losslessly, and an overridden or spread tenant rides in every table every Router
// fetches. A longer name is refused with an error wrapping [ErrInvalid] (a table's with
// [ErrInvalidTable]) that quotes only its first 64 bytes.
//
// Never delete an ownership record when cleaning up a source: a closed record keeps stale
// clients out, and a missing one could be claimed again by Provision.
//
// # Stats
//
// [Router.Stats] counts routes by kind (hash, override, spread), stale-route redirects,
// table fetches and their failures, installs, tables and announcements ignored for being
// older, and the installed generation.
//
// # Per-tenant load
//
// With [Options.Load] enabled (it is off by default), a Router counts each tenant's Do and
// Get calls in a bounded heavy-hitters summary (Space-Saving, [LoadOptions.Capacity]
// tenants, fixed memory) and, just after each interval ([LoadOptions.Interval], aligned on
// the Unix epoch) ends, adds its counts to that interval's summary in the control Redis, in
// one script idempotent by (instance, interval). Every Router under the prefix adds to the
// same interval, so the summary is the fleet's. [ReadTenantLoad] reads it without a Router
// and writes nothing: per tenant, operations and a rate over a window of intervals, busiest
// first. Counts of the interval under way when a Router closes, and of a report that
// fails, are dropped ([Stats].LoadErrors). Keys, in the slot of one hash tag:
//
//	{P:load}:index            ZSET   member "<to>:<interval ms>", score to (unix ms)
//	{P:load}:i:<to>:<iv>      HASH   t:<tenant> = operations, e:<tenant> = error bound,
//	                                 ops = all operations, r:<instance> = 1, from, to
//
// both expiring after [LoadOptions.Retention]. The control Redis's user then also needs
// "~{P:load}* +hsetnx +hincrby +pexpire +zadd +zremrangebyscore", and a reader
// "+zrevrange +zrangebyscore +hgetall" on the same keys.
//
// # What is assumed of Redis
//
// Redis 7.0 or newer (scripts read XINFO STREAM; migrate detects a change log trimmed past
// its position by max-deleted-entry-id, and [DefaultLogMaxLen] trims). Scripts are atomic
// and a shard has one writable owner per slot. A write acknowledged by a
// shard is only as durable as that shard's persistence: run shards with AOF
// (appendfsync always) and, with replicas, WAIT, if acknowledged writes must survive a
// crash. A shard that restarts empty has lost its ownership records too, so it refuses
// every routed write with ErrStaleRoute rather than acting as an owner of data it no longer
// has; reopening it (Provision) is an operator's decision to accept that loss. A shard
// restored from an old snapshot holds old ownership records, and the guarantee then holds
// only relative to what it holds. Clocks only set retention times; they never decide
// ownership.
//
// # ACL
//
// Two users, each with key access to its prefix only (P as in the key layout). The control
// Redis's user: "~P:table ~{P:table}* ~{P:load}* &P:table:announce +evalsha +eval +hmget
// +hget +hset +publish +subscribe +ping +hsetnx +hincrby +pexpire +zadd +zremrangebyscore
// +zrevrange +zrangebyscore +hgetall" (Store.Load reads the table with HMGET; Store.Publish
// and PublishGuarded are one script calling HGET, HMGET, HSET and PUBLISH; a Router
// subscribes to the announcements and go-redis checks a silent subscription with PING;
// "{P:table}*" covers the guard hashes of PublishGuarded; "{P:load}*" is the per-tenant load
// summary, which a Router with LoadOptions.Enabled adds to with one script calling HSETNX,
// HINCRBY, HGET, HSET, PEXPIRE, ZADD and ZREMRANGEBYSCORE, and ReadTenantLoad reads with
// ZREVRANGE, ZRANGEBYSCORE and HGETALL). Without SUBSCRIBE a Router still works and learns
// new tables by its poll only. Each shard's user: "~{P:* +evalsha +eval +exists +hdel
// +hexists +hget +hgetall +hmget +hscan +hset +xadd +xinfo|stream +zadd +zrangebyscore +zrem"
// (every read and write is a script, and Redis checks the commands a script calls; HGETALL is
// Shard.Ownership's read; HSCAN is Provision's look for a tenant's data in its bucket;
// XINFO STREAM gives a closed unit's last change-log ID; HDEL purges expired records).
// A cluster client also needs what go-redis sends to learn the slot map (CLUSTER SLOTS,
// SHARDS and NODES, READONLY, ASKING, COMMAND), and every client the connection commands
// (HELLO, AUTH). [ControlACLRule] and [ShardACLRule] return the two rules for the options
// given to New, NewStore or NewShard, as ACL SETUSER arguments, and [ACLRule] their union for one user that is both; the package's
// tests run once as a user holding only the union (CELEBRITYTEST_ACL=routing). Package
// migrate's rule adds to these.
package routing
