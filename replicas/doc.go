// Package replicas keeps N physical copies of a hot logical key on distinct Redis Cluster
// masters: reads go to one copy, writes go to all, and a popular miss reaches the source
// once for the whole fleet.
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
// is one physical key, the logical key itself: [Replicator.Get] is one GET of it, and
// [Replicator.Set] one script on it. [Replicator.Promote] warms the copies from the logical
// key before reads use them, so a promotion causes no misses and no source loads.
//
// # Key layout
//
//	<key>                              the logical key, always written: the authority
//	<prefix>{<tag_i>}<key>             copy i, i < N, for hot keys
//	<prefix>{<tag(slot(key))>}lease:<key>   the fill lease, in the logical key's slot
//
// Every value is stored as "c1,<version>,<kind>,<registry>,<data>": kind "v" or "x" (a
// tombstone), data the host's bytes. The logical key's registry lists the copies writers
// must update (their slots and expiry). prefix defaults to [DefaultPrefix].
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
// falls back to the other copies and then the logical key on a miss or an error, and refills
// a copy it found empty. [Replicator.Set] writes the logical key first, then every copy in
// its registry, pipelined per node; [Replicator.Delete] writes versioned tombstones the same
// way. Every write is set-if-newer by the host's version, in one script per physical key.
// Precisely:
//
//   - No physical key ever moves to an older version; a retried or late write is harmless.
//     A tombstone refuses writes of its version or older for [Options].TombstoneTTL, so a late
//     Set cannot resurrect a deleted value. The logical key's tombstone lasts as long as the
//     copies registered there, so a copy a Delete could not reach is still written later.
//   - The logical key is the commit point: a Set it refuses returns [ErrStaleVersion] and
//     writes nothing else; a Set that fails there returns the error and writes nothing else
//     (retry with the same version to complete it).
//   - When Set returns nil, every live copy holds that version or a newer one, so every later
//     read on every instance returns that version or a newer one (or a miss once it expires).
//     This holds across instances with different N, different hot sets and mid-promotion,
//     because readers register the copies they fill at the logical key (atomically with
//     reading it) and writers write every registered copy.
//   - When Set returns a [*PartialWriteError], the copies it names may keep an older version
//     until a later write reaches them or they expire; a read that picks one of them may
//     return that older version. A read that falls back (because its copy failed or missed)
//     reads the next copies, which took the write unless they are named too. Copies not named
//     hold the new version.
//   - Copies expire no later than the logical key's registration of them, so the registry
//     always covers every live copy; copies of a layout no instance uses any more expire.
//
// # Changing N
//
// N is an option of each instance, so it changes by deploying instances with the new
// value. Copy i is the same physical key for every N (a smaller N's layout is a prefix of a
// larger one's), and every instance writes all copies registered by any instance, so during
// the change no reader misses (a copy nobody wrote yet is a fallback and a refill, never a
// miss) and none reads a copy that writers skip. Copies that only the departed N used stop
// being registered and expire with their last registration. The registry holds at most 64
// entries (two full layouts of MaxCopies); beyond that the oldest registrations are dropped
// and their copies may lag until they expire.
//
// # Fleet-wide fill lease
//
// [Replicator.GetOrLoad] reads like Get and, on a miss everywhere, takes a lease next to the
// logical key (a token with [Options].LeaseTTL). One caller in the fleet loads from the
// source and fills; callers on the same instance share its fetch; callers on other instances
// poll until the fill appears. A holder that dies loses its lease when it expires and one
// waiter takes over; a fill whose token is no longer the lease is refused, so a slow filler
// cannot overwrite a newer value.
//
// # What is assumed of Redis
//
// Redis 7 (scripts use TIME, SET KEEPTTL). Keys are not evicted before their TTL: under an
// allkeys eviction policy a logical key (and its registry) can disappear before its copies,
// and a later write would then miss those copies until they expire. During a slot migration
// instances may briefly compute different layouts; the registry keeps both written. Nothing
// here needs persistence: this is a cache.
//
// # Example
//
//	r, err := replicas.New(client, replicas.Options{Copies: 3})
//	if err != nil { ... }
//	defer r.Close()
//	_ = r.Promote(ctx, "post:ronaldo")
//	item, err := r.GetOrLoad(ctx, "post:ronaldo", time.Minute, func(ctx context.Context) (replicas.Item, error) {
//		body, version, err := db.LoadPost(ctx, "ronaldo")
//		return replicas.Item{Value: body, Version: version}, err
//	})
package replicas
