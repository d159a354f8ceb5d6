// Package replicas keeps N physical copies of a hot logical key on distinct Redis Cluster
// masters: reads go to one copy, writes go to all, and a popular miss reaches the source
// once for the whole fleet.
//
//	r, err := replicas.New(client, replicas.Options{Copies: 3}) // *redis.Client or *redis.ClusterClient
//	if err != nil { ... }
//	defer r.Close()
//	_ = r.Promote(ctx, "post:ronaldo") // or Options.Hot, or Options.IsHot
//	item, err := r.GetOrLoad(ctx, "post:ronaldo", time.Minute, func(ctx context.Context, key string) (replicas.Item, error) {
//		body, version, err := db.LoadPost(ctx, key) // once for the whole fleet
//		return replicas.Item{Value: body, Version: version}, err
//	})
//	err = r.Set(ctx, "post:ronaldo", body, version, time.Hour) // after the database write
//
// # The problem
//
// A key hashes to one slot, so one master serves every read of it, however many masters
// the cluster has. When one key is too hot for one machine even behind an in-process cache,
// it needs several physical representations on different masters. This package gives a
// [Replicator] over the host's go-redis client (a *redis.Client or a *redis.ClusterClient).
//
// # Only hot keys pay
//
// A key is replicated only while the host says it is hot: [Options].Hot, the
// [Options].IsHot callback (for example fed by a hot-key detector), or [Replicator.Promote]
// and [Replicator.Demote] at run time (these win over the other two). A key that is not hot
// is one physical key, its primary record: [Replicator.Get] is one GET of it,
// [Replicator.Set] one script on it, and a [Replicator.GetOrLoad] hit one script.
// [Replicator.Promote] warms the copies from the primary before reads use them, so a
// promotion causes no misses and no source loads.
//
// # Key layout
//
// Every physical key lives under [Options].Prefix (default [DefaultPrefix]); the host's own
// keys are never read or written, even when they have the logical key's name:
//
//	<prefix>{<tag(slot(key))>}k:<key>   the primary record: the authority, always written;
//	                                    while it holds no record, the fill lease or the
//	                                    absent or error marker
//	<prefix>{<tag_i>}c:<key>            copy i, i < N, for hot keys
//	<prefix>{<tag(slot(key))>}l:<key>   the fill lease while the primary holds a tombstone
//	                                    or an expired value
//	<prefix>{<tag(slot(key))>}w:<key>   the list the filler pushes to, to wake the waiters
//
// The primary, side lease and list share one slot (the logical key's), so each script
// touches one slot. Every record is "c2,<version>,<kind>,<expiry>,<registry>,<data>": kind "v"
// or "x" (a tombstone), expiry the absolute end of the value (Unix ms), data the host's
// bytes. The primary's registry lists the copies writers must update, each with the absolute
// end of its registration.
//
// The prefix names the cache: instances share data exactly when they share Prefix. Two
// instances with different prefixes are two caches that never see each other's writes (and
// each loads a missing key once), but neither can leave the other reading a copy its writes
// skip: there is no record whose registry names copies under another prefix. A fleet
// configured with different prefixes by mistake (a rolling deploy that changed it) would
// thus serve older versions from one prefix's cache after a write through the other: to
// refuse that, give every instance the same [Options].FleetKey, a key the host names; New
// then fails with [ErrPrefixMismatch] while instances with another prefix are live in
// that roll (the prefix enrolled first keeps it until its last instance leaves).
//
// Placement: on a cluster client the masters are sorted by address; copy i goes to master
// (start+i) mod m with start = xxhash64(key) mod m (the project's stable hash), so N ≤ m
// copies land on N distinct masters and N > m copies put ⌊N/m⌋ or ⌈N/m⌉ on each. tag_i is
// the short tag of a slot of that master (distinct for copies sharing a master). The layout
// depends only on the key, N and the slot map, so every instance computes the same one; it
// is recomputed when the slot map changes (reloaded every [Options].RefreshInterval, soon
// after a copy fails, or on [Replicator.Refresh]). On a standalone client there are no
// masters to spread over: the copies are still N distinct keys (which keeps the lease and
// the protocol identical, and is how the tests run both deployments).
//
// # Reads, writes and what is guaranteed
//
// [Replicator.Get] reads one copy (random, or pinned per instance with [Options].Affinity),
// tries the next copy when one fails, and reads the primary when its copy is empty or
// expired, registering and refilling that copy. [Replicator.Set] writes the primary first,
// then every copy in its registry, pipelined per node; [Replicator.Delete] writes versioned
// tombstones the same way. Every write is set-if-newer by the host's version, in one script
// per physical key. Precisely:
//
//   - No physical key moves to an older version while it lives, and a record whose value
//     expired stays as a version floor (a "ghost" that reads as a miss) for as long as a copy
//     registered at it may live; so a retried or late write is harmless. A tombstone refuses
//     writes of its version or older for at least [Options].TombstoneTTL. Without WAIT this
//     holds for what the masters keep; see "What is assumed of Redis" for failovers.
//   - The same version with other content (other bytes, or a value where a tombstone is, or
//     the reverse) is refused with [ErrConflict]; the same content again is a no-op.
//   - The primary is the commit point: a Set it refuses returns [ErrStaleVersion] or
//     [ErrConflict] and writes nothing else; a Set that fails there returns the error and
//     writes nothing else (retry with the same version to complete it).
//   - When Set returns nil, every live copy holds that version or a newer one, so every later
//     read on every instance returns that version or a newer one (or a miss once it expires).
//     This holds across instances with different N, different hot sets and mid-promotion,
//     because readers register the copies they fill at the primary (atomically with reading
//     it) and writers write every registered copy.
//   - When Set returns a [*PartialWriteError], the copies it names may keep an older version
//     until a later write reaches them or they expire; a read that picks one of them may
//     return that older version. Copies not named hold the new version.
//   - A registration is never shortened (a later write with a shorter TTL keeps it), and the
//     primary lives until its last registration ends. A copy's value and key end at absolute
//     times fixed at the primary when the write ran there, so a copy write delayed in flight
//     cannot stretch them: no copy outlives the registration that makes writers reach it.
//     Copies of a layout no instance uses any more expire with their last registration.
//
// # Changing N
//
// N is an option of each instance, so it changes by deploying instances with the new
// value. Copy i is the same physical key for every N (a smaller N's layout is a prefix of a
// larger one's), and every instance writes all copies registered by any instance, so during
// the change no reader misses (a copy nobody wrote yet is a fallback and a refill, never a
// miss) and none reads a copy that writers skip. The registry holds at most 64 entries (two
// full layouts of MaxCopies); beyond that the oldest registrations are dropped and their
// copies may lag until they expire.
//
// # Fleet-wide fill lease
//
// [Replicator.GetOrLoad] of a key that is not hot starts with one plain command, SET NX GET
// on the primary: it returns the value (a hit costs that one command) or takes the lease in
// the primary's own key (a token that holds it for [Options].LeaseTTL, in a marker given
// the value's TTL); the fill is the second and last round trip of a miss, and usually one
// write that swaps the marker for the value, keeping the key's TTL: the server runs three
// commands per miss (SET NX GET, the fill script, its SET), one per hit, against GET and
// SET (two) and GET (one) without the lease. A filled value lives its TTL from when the
// lease was taken, that is from the start of its load. One caller in the fleet loads from the source and fills; callers
// on the same instance share its fetch; callers on other instances block on a list the
// filler pushes to (no polling; one blocked connection per instance and key) and read the
// fill. The holder renews its lease every LeaseTTL/3 while it loads and fills, so a slow
// load keeps it (up to [Options].LoadTimeout); a holder that dies (or is paused, or cut off)
// loses it LeaseTTL after its last renewal, and one waiter takes over with a lease of a whole
// LeaseTTL from that moment, by the server's clock, so the source runs once more for the
// fleet, not once per waiter; a fill whose token is no
// longer the lease is refused, so a slow filler cannot overwrite a newer value (its callers get the stored value
// or, when none is live, it takes the lease again and fills under it). A caller arriving while its instance's fetch is
// reading starts a fetch of its own, so it always sees the writes that returned before it
// arrived. A source that does not have the
// key, or fails, is asked once per [Options].NegativeTTL or [Options].ErrorTTL for the whole
// fleet: the lease keeps an absent or error record (the error's text) that every caller is
// answered with meanwhile. A load of an older version than a live tombstone (a source
// lagging behind a Delete) counts as absent: it is neither filled nor served.
//
// [Replicator.GetOrLoadMany] does the same for several keys at once: the plain commands of
// the keys that are not hot go in one pipeline (one round trip per master), the keys whose
// leases it takes are loaded with one call of a [BatchLoader] and filled, and the others go
// the way of GetOrLoad. A waiting instance blocks at most half its client's pool on wake
// lists (one connection per key), so its own holders always find connections to renew, fill
// and release their leases.
//
// # What is assumed of Redis
//
// Redis 7 (scripts use TIME, SET PXAT, KEEPTTL). The clocks of the masters agree within a
// small skew, and the hosts' clocks with theirs ([Options].Clock is compared with record
// expiries on reads): a skew of d lets a copy outlive its registration, or a value its TTL,
// by d, and a lease whose holder died last d longer (a lease taken by the plain command carries a deadline
// of the holder's clock until its first renewal; takeovers and renewals use the server's). Keys are not evicted before their TTL: under an allkeys eviction policy a primary
// (and its registry) can disappear before its copies, and a later write would then miss
// those copies until they expire. During a slot migration instances may briefly compute
// different layouts; the registry keeps both written. Nothing here needs persistence: this
// is a cache.
//
// Replication is asynchronous: without [Options].WaitReplicas, a write acknowledged by a
// master that fails over before its replica copied it is lost, and readers see the previous
// version again (or a miss) on that key; the ordering above holds for what the surviving
// masters keep. A primary's master that loses writes that way (or is restored from an
// older backup) also forgets the registrations made since: copies written under them stay
// as they are until they end, and a write by an instance to which the key is not hot does
// not reach them (one to which it is hot registers its layout again and does). With WaitReplicas n, every write (primary, copies, fills) is followed by
// WAIT n on the same connection; a write not acknowledged in [Options].WaitTimeout returns
// an error wrapping [ErrNotReplicated], and a write that returned nil survives the failover
// of its master to an acknowledging replica.
//
// # ACL
//
// The client's user needs key access to Options.Prefix and the scripting commands with every
// command the scripts call (Redis checks those too): for the default prefix,
// "~celebrity:replicas:* +evalsha +eval +get +set +del +pexpire +pttl +rpush +time +blpop",
// plus "+wait" when Options.WaitReplicas is set, and with Options.FleetKey, key access to
// it and "+zadd +zrem +zrange +zremrangebyscore". BLPOP is how an instance waiting for a
// fleet-wide fill learns it is done; refused, the waiter polls instead. No channel is used.
// [ACLRule] returns the rule for a Replicator's Options, as ACL SETUSER arguments; the
// package's tests run once as a user holding only it (CELEBRITYTEST_ACL=replicas).
package replicas
