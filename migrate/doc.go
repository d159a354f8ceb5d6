// Package migrate moves a placement unit of package routing (a bucket, an overridden
// tenant, or one sub-bucket of a spread tenant) from one shard to another without ever
// having two authoritative owners, and moves a pure cache's tenant with a warm target and a
// cheap rollback.
//
//	co, err := migrate.New(control, migrate.Options{Shards: map[string]migrate.ShardClient{
//		"a": shardA, "b": shardB,
//	}})
//	if err != nil { ... }
//	st, err := co.Migrate(ctx, migrate.Spec{Unit: routing.BucketUnit(72), Target: "b"})
//	// After a crash: st, err = co.Resume(ctx, id)
//
// # The problem
//
// Moving a hot tenant to a shard of its own only helps if, at every instant, exactly one
// shard may accept its writes; nothing acknowledged is lost on the way; nothing deleted
// comes back; and a client whose reply was lost before the move, retrying with the same
// operation ID, finds its original result on the new owner instead of doing the operation a
// second time (taking a second seat in a course that has one left).
//
// # Durable mode: the guarantee and how it is kept
//
// A [Coordinator] drives one migration per unit through states it journals in the control
// Redis before or right after acting:
//
//	OwnedA -> Copying -> CatchingUp -> ClosedA -> ReadyB -> OwnedB
//	   \_________\____________\__ Cancelling -> Cancelled | Aborted
//
// In each state:
//
//   - OwnedA: the target's ownership record becomes "importing" for this migration (it
//     refuses every client read and write), and whatever an earlier era left there is deleted.
//   - Copying: a snapshot (HSCAN pages, resumable from the journaled cursor) copies records,
//     tombstones and the idempotency records a retry can still need (those written within
//     Options.OpRetryWindow) while the source keeps taking writes. The source's
//     change-log position is noted before the scan starts.
//   - CatchingUp: the change log from that position is applied. Every guarded write appends
//     its entry in the same script as the write, so the log is complete. Entries are read by
//     one script that also proves that none was trimmed. If entries were trimmed, the target
//     is reset and the copy restarts from a fresh snapshot. Then the copy is verified. A
//     round reads up to the log's end as it was when the round started; the source is
//     closed once a round leaves at most Options.CloseLag entries, or once the lag has not
//     reached a new low for 2 rounds (writers as fast as the copy: the pause then covers
//     that lag), or after Options.MaxCatchUpRounds.
//   - ClosedA: one script closes the source for the old generation and returns the log's
//     final position. A write racing it is either in the log before that position or refused
//     with routing.ErrStaleRoute. No "requests seem to be over" heuristic is involved. The
//     target applies up to the barrier and the verification is completed; then the target's
//     record is marked as holding this migration's verified copy. Writes to the unit pause
//     from here.
//   - ReadyB: the target's record opens at the new generation, then the new table is
//     published by compare-and-set (generation = current + 1, retried if another table was
//     published meanwhile). The source is closed before the target opens, so at most one
//     owner is open at any instant. A target without the mark (its shard restored to a
//     backup older than the mark, which may lack copied records) is never opened: the move
//     aborts and reopens the source.
//   - OwnedB: done. Stale clients get ErrStaleRoute from the source, learn the new table and
//     retry on the target with the same op ID. The idempotency records came along, so an op
//     applied before the barrier replays its first result. [Coordinator.Cleanup] deletes the
//     source's closed copy after Options.Grace (with a new epoch of the unit: a Cleanup
//     overtaken by a newer one is refused by the source's script). Moving back is a new
//     migration at a new generation.
//
// Applying on the target is order-insensitive. A record replaces the stored one only if its
// version is strictly newer. Tombstones are versioned and kept for their retention, so a
// late snapshot copy cannot resurrect a deleted key. An equal version with other content, or
// an op ID with another result, is a protocol conflict: the migration aborts with a
// [*ConflictError]. Verification compares the two sides item by item (records, versions,
// tombstones, op records) and reports per-side [Digest]s. Counts alone would miss a record
// replaced by another. The full pass runs while the source still takes writes. Under the
// barrier, only the items that differed or that the log touched since the pass started are
// re-read, so the write pause grows with the writes during the copy, not with the unit's size.
// A drive that stops with an error (a lost reply) leaves its verification to the next
// Resume in the same process, which continues it if it is still exact (no snapshot restart
// since, and every log entry the target applied after the pass touched it) instead of
// scanning the unit again; a Resume in another process makes a full pass.
//
// What bounds a move's cost: the unit's live records and tombstones, plus the idempotency
// records written within Options.OpRetryWindow (the longest a client retries an operation),
// plus the writes during the move. With the default window (the retention, 24 h) every live
// idempotency record moves, so a unit with a long write history copies that history; a
// shorter window bounds it by the window's writes (a retry later than that after its first
// attempt is applied as a new operation on the new owner). Records left behind stay in the
// source's closed copy until [Coordinator.Cleanup].
//
// Every step re-checks the shards instead of trusting a lost reply. Ownership records and
// the journal change by compare-and-set, and copying and applying are idempotent. So
// [Coordinator.Resume] continues a migration whose driver died at any point. A migration
// whose source ownership changed underneath it aborts. [Coordinator.Cancel] works until the
// source is closed: the target's copy is deleted and its record left "cancelled". From
// ClosedA on, a migration only goes forward. An abort before the target opened (conflict,
// verification) reopens the source if this migration closed it.
//
// # One driver at a time: leases and fencing epochs
//
// A driver (a Resume, the Resume inside Migrate, a Cancel) first takes the migration over:
// one script takes a new fencing epoch from the unit's epoch counter, writes it and a lease
// (Options.LeaseTTL, on the control Redis's clock) into the journal record, and only then
// does the driver act. The takeover is idempotent by a token of its own: when its reply is
// lost, the driver runs it again with the same token and finds its own takeover (the same
// epoch, the lease renewed) instead of taking a new epoch and leaving the lease to a token
// nobody holds (after 6 lost replies in a row it gives up, and a takeover that did happen
// holds the lease for nobody until it expires, as for a driver that crashed); a drive that
// stops on an error releases its lease (retried after a lost reply), so the next Resume
// takes over at once. A driver that finds, right after its takeover, that another driver
// took the migration over since (it was stopped in between) returns [ErrFenced]. Every
// step a driver takes carries its epoch and is refused in the same atomic step as its
// write once a newer epoch exists: journal steps compare the record's
// epoch; the target's and source's scripts keep the highest epoch that acted on the unit in
// its ownership record (field fence) and refuse an older one; the table that ends the
// migration is published only while the journal still holds the driver's epoch in ReadyB
// (routing's [routing.Store.PublishGuarded]). Because epochs come from one counter per
// unit, a driver of an old migration of the unit is refused too. A driver that was paused
// (SIGSTOP, a GC pause, a partition) and lost the migration stops at its next step with
// [ErrFenced], having changed nothing since. A Resume waits while another driver's lease
// runs (a second Migrate of a running migration waits for it), so a crashed driver is taken
// over once its lease expires, without an operator. Cancel takes over at once, even from a
// live driver, and always terminates: it returns the unit to the source with the target
// clean, or refuses with [ErrCancelRefused] from ClosedA on. A claim on a target that no
// running migration owns any more is listed by [Coordinator.Claims] and removed by
// [Coordinator.ClearClaim].
//
// # Carving a tenant out of its bucket
//
// [Coordinator.Carve] moves one tenant of a shared hash bucket into an override unit of its
// own on another shard, durably, through the same states and with the same guarantees: one
// open owner for the tenant at every instant, nothing acknowledged lost, nothing deleted
// resurrected, a lost reply replayed from the target. Only the tenant's items travel (its
// records, tombstones and idempotency records, told apart inside the bucket by the record
// field, which starts with the tenant; see routing.OpKey, which has the same form); the bucket's change log is
// applied filtered to them. The barrier closes the tenant only: one script marks it as moved
// out of the bucket (routing's x:<tenant>; the bucket then refuses the tenant's reads and
// writes) and returns the log position final for it, while the bucket stays open and its
// other tenants keep writing without a pause. The flip publishes an override of the tenant
// to the target. The carve-out holds the bucket's lock (one carve-out or move of a bucket at
// a time), takes its drivers' epochs from the tenant unit's counter, and fences the bucket's
// record through a per-tenant field, so a bucket's own migrations and a tenant's carve-outs
// never fence each other. Until [Coordinator.Cleanup] (after Options.Grace) the bucket keeps
// the tenant's items, refused to routed calls but readable with plain commands for
// inspection. A flip back would be safe only until the first write on the target; after
// that, going back must be a new migration: a fold-back. An overridden tenant moves on to
// another shard with [Coordinator.Migrate] of its unit.
//
// # Folding a tenant back into its bucket
//
// [Coordinator.Fold] is the reverse of a carve-out, a new migration at a new table
// generation: the tenant's override unit is the source and its hash bucket, open for its
// other tenants throughout, the target. Before the copy, one script marks the tenant as
// moved out of the bucket for the fold-back (the bucket refuses the tenant's routed calls;
// the carve-out's mark is usually there already and is taken over), and the tenant's items
// an earlier era left in the bucket (a closed copy never cleaned up) are deleted page by
// page, fenced, so a stale copy is never mistaken for data. Copy, change log and
// verification then write and compare the tenant's items in the bucket only. The barrier
// closes the override unit, as a move of the unit does; once the copy is verified, one
// script notes it in the bucket (xr:<tenant>); the flip removes the tenant's mark from the
// bucket, only with that note there, and publishes the table without the override, so the
// source is closed before the bucket serves the tenant again. A bucket shard restored to a
// point before the note (whose copy may lack records) is never opened for the tenant: the
// fold-back aborts and the unit reopens. A cancel first raises the bucket's fence for the
// tenant (xf), whatever it then finds to delete, so a paused driver of the fold-back writes
// nothing into the bucket once the cancel began. The fold-back holds the unit's and the
// bucket's locks (taken and released together), takes its epochs from the tenant unit's
// counter and fences the bucket through the tenant's xf field, as a carve-out does. A
// cancel or abort deletes its copy from the bucket and leaves the tenant marked there and
// open on its unit. [Coordinator.Cleanup] deletes the unit's closed copy after the grace.
//
// # Splitting a tenant over several shards
//
// [Coordinator.Split] turns an overridden tenant into a spread of K sub-buckets (each record
// in the sub-bucket xxhash64(key) % K, as routing's Router routes it), or changes the width
// of a spread (4 -> 8, 8 -> 4), through the same states and with the same guarantees. One
// journal record and one driver epoch cover every source (the override unit, or each old
// sub-bucket: a lane, with its own snapshot cursor, applied position and barrier in the
// record) and every new sub-bucket; each copied item is applied to the sub-bucket of its
// key. The barrier closes every source; the verification compares the tenant's items of all
// sources with those of all targets, and fails on an item a target holds for another
// sub-bucket; the flip opens every new sub-bucket and publishes one table with the new
// spread (a re-split with routing.Store.PublishReshaped, the one publication that may change
// a spread's width). A re-split moves every record: the old sub-buckets close as a whole and
// the new ones fill from empty, so a new sub-bucket may not reuse the shard of the old
// sub-bucket with its index. A tenant in a shared bucket is carved out first. The way back
// is [Coordinator.Merge] (a split with one target): every sub-bucket is a source and the
// tenant's override unit on one shard the target; the flip publishes the override and no
// spread. The split
// holds the locks of the tenant unit and of every old and new sub-bucket, and its epochs
// are above every one of their counters (acquire raises them all), so a later move of one
// sub-bucket is fenced against it.
//
// # Cache mode
//
// [Cache] moves a tenant of a pure cache. It copies the tenant's hottest keys (a list from
// the host or from package hotkeys) to the target with their remaining TTL, then flips an
// override of the tenant to the target in a new table generation. The old copy is left to
// expire, so until it does, [Cache.Rollback] is a flip back to a warm shard. Rollback is
// offered ([CacheStatus.RollbackSafe]) while at least half of the warmed keys are still
// alive on the source (by the TTLs they were copied with: a few keys with a long or no TTL
// do not keep it open) and for at most CacheOptions.RollbackWindow after the flip; after
// that it is refused with [ErrRollbackUnsafe]. A rollback serves the source's old copy: a
// key written on the target while flipped is served with its value from before the flip
// until that copy expires or is overwritten, which the window bounds. A move whose caller
// died is listed by [Coordinator.Unfinished] (Status.Cache) and continued by
// [Cache.Resume].
//
// Every cache step (the flip, a rollback, Finish) first takes a new fencing epoch of the
// tenant into the move's journal record, and its journal write and table publication are
// refused in the same script once a newer one exists ([ErrFenced]). A rollback moves the
// record to RollingBack in the same step as it takes its epoch, so a Finish cannot end the
// move as flipped while the flip back is being published; a Rollback of a RollingBack move
// completes it.
//
// # Key layout
//
// On the shards, migrate uses routing's per-unit keys (see package routing), all in the
// unit's hash slot. It also adds two fields to the ownership hash: mig = the ID of the
// migration importing into it, and fence = the highest driver epoch that acted on the unit
// on that shard. A carve-out adds, in the bucket's ownership hash, xm:<tenant> = the ID
// of the carve-out that marked the tenant as moved out, and xf:<tenant> = the highest epoch
// of a carve-out driver of that tenant that acted there. A fold-back takes the tenant's mark
// over (xm:<tenant> = its ID) while it copies, uses the same xf:<tenant> fence, and notes
// its verified copy in xr:<tenant> = its ID (left after the flip, removed by the next
// fold-back's claim).
//
// In the control Redis, in the slot of routing's table key (hash tag {P:table}, P is
// routing's prefix as in its key layout, so one script can touch a record, its lock,
// its epoch counter and the table on a cluster):
//
//	{P:table}:migrate:j:<id>             HASH   journal record: unit, source, target, generations,
//	                                            state, snapshot position and cursor, applied
//	                                            position and count, barrier, digest, counters,
//	                                            timestamps, reason; driver epoch, holder, lease
//	{P:table}:migrate:lock:<unittag>     STRING ID of the unfinished migration of that unit
//	{P:table}:migrate:epoch:<unittag>    STRING the unit's fencing-epoch counter
//	{P:table}:migrate:index              ZSET   every migration ID by creation time
//
// # What is assumed of Redis
//
// Redis 7.0 or later: trim detection reads XINFO STREAM's entries-added and
// max-deleted-entry-id. Scripts are atomic on one slot. A shard (and the control Redis) keeps
// what it acknowledged, or the guarantee holds only relative to what survived (run AOF with
// appendfsync always if acknowledged writes must survive a crash). The coordinator's clock
// only sets retention times and the grace period; it never decides ownership. Leases run on
// the control Redis's clock; a lease only decides when a waiting driver may take over, never
// who may write: that is the epoch. If the control Redis loses the epoch counter (restored
// from an older copy), fencing holds only relative to the epochs that survived.
//
// # ACL
//
// The Coordinator and the Cache use routing's two users (see package routing's ACL rule,
// with the same key patterns) with more commands. On the control Redis, for the journal,
// its lock, epoch and index: "+hgetall +zrange +incr +time +exists +get +set +zadd +del".
// On each shard, for the copy (HSCAN and ZMSCORE of the snapshot, XRANGE of the change log
// in the source's probe script, DEL of a stale import or of a cleaned-up source):
// "+del +zmscore +xrange". A Cache copies the tenant's own keys, which are the host's, not
// under the prefix: add their key pattern on the shards with "+pttl +dump +restore". For the
// default prefix the whole control rule is "~celebrity:routing:table
// ~{celebrity:routing:table}* ~{celebrity:routing:load}* &celebrity:routing:table:announce
// +evalsha +eval +hmget +hget +hset +publish +subscribe +ping +hsetnx +hincrby +pexpire +zadd
// +zremrangebyscore +zrevrange +zrangebyscore +hgetall +zrange +incr +time +exists +get +set
// +del" (routing.ControlACLRule plus the commands above),
// and the shard rule "~{celebrity:routing:* +evalsha +eval +exists +hdel +hexists +hget
// +hgetall +hmget +hscan +hset +xadd +xinfo|stream +zadd +zrangebyscore +zrem +del +zmscore
// +xrange" (+pttl +dump +restore with the tenants' key patterns for a Cache). No channel is
// subscribed besides the Router's. [ControlACLRule] and [ShardACLRule] return these rules
// for the options given to New or NewCache (the shard rule with a Cache's
// CacheOptions.TenantKeys), as ACL SETUSER arguments; the package's tests run once as a user holding their union, [ACLRule]
// (CELEBRITYTEST_ACL=migrate).
package migrate
