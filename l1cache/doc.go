// Package l1cache is an in-process cache that a celebrity key cannot stampede.
//
//	users, err := l1cache.New(func(ctx context.Context, id string) (User, error) {
//		return db.User(ctx, id) // returns l1cache.ErrNotFound for an unknown id
//	}, l1cache.Options[User]{MaxEntries: 100_000, Fresh: time.Second, Stale: 10 * time.Second})
//	if err != nil { ... }
//	defer users.Close()
//	inv, err := l1cache.NewInvalidator(rdb, users, l1cache.InvalidatorOptions{Channel: "users:inv"})
//	if err != nil { ... }
//	defer inv.Close()
//
//	u, err := users.Get(ctx, "42")       // one load per instance per second at most
//	err = inv.Invalidate(ctx, "42")       // after writing user 42 to the database
//
// # The problem
//
// A hot key read 100,000 times a second by each of 100 instances would cost its Redis shard
// ten million reads a second. With a per-instance cache in front, it costs about one read per
// instance per Fresh window. But a plain cache only moves the problem: when the hot entry
// expires, every request of every instance misses at the same moment (a thundering herd), a
// load that was in flight when the key changed writes the old value back, and an outage of the
// source turns into an outage of the service.
//
// # The guarantee
//
// A [Cache] holds values of string keys, loaded by a [Loader] the host supplies (typically a
// replicas read or a database query). For every key:
//
//   - One load at a time per key and cache (singleflight); a load superseded by Set,
//     Invalidate or MarkAllStale, or whose loader outlived LoadTimeout, may finish beside
//     its successor but installs nothing. Every
//     [Cache.Get] that needs the value waits for the load, each on its own context; the load
//     itself runs detached
//     (context.WithoutCancel plus Options.LoadTimeout), so one cancelled caller never fails
//     the others. A loader panic reaches the waiters as a [*PanicError] and never leaves the
//     key stuck.
//   - A loaded value is served without any reload for Fresh (shortened by a random Jitter so
//     that copies loaded together do not expire together), then for Stale as the old value
//     while one background refresh runs, then it is gone. A fresh hit may refresh early with
//     the XFetch probability (Options.Beta), so a hot key is usually reloaded before anyone
//     sees it expire (at the price of some extra loads, see Options.Beta). Background
//     refreshes are capped by Options.MaxRefreshes. Without early refresh each instance
//     loads a hot key once per fresh window: about 1/(Fresh*(1-Jitter/2)) times a second.
//   - A value is never older than Fresh+Stale (+StaleIfError while loads fail), measured
//     from the start of the load that read it.
//   - When loads fail, the last good value is served for StaleIfError after Fresh ended, then
//     the error is returned. Errors are cached for ErrorTTL (at most a minute), absence
//     ([ErrNotFound]) for NegativeTTL.
//   - [Cache.Set] and [Cache.Invalidate] are visible at once, and a load that started before
//     them never installs its result (each starts a new generation of the key).
//
// The hit path allocates nothing and, with the default coarse clock, reads no system clock;
// its cost is within a small factor of the store's own Get (see BenchmarkHit).
//
// The store is otter v2 (W-TinyLFU admission and eviction), bounded by Options.MaxEntries or
// by Options.MaxCost through a Sizer.
//
// # Cross-instance invalidation
//
// The cache needs no Redis. An optional [Invalidator] connects the instances of one cache
// over Redis pub/sub: [Invalidator.Invalidate] drops keys locally and publishes them on a
// channel; every other instance's Invalidator drops them when the message arrives (its own
// messages are recognised by a random nonce and ignored; an instance that shares another's
// InstanceID still applies its messages, and counts and logs the clash). On a standalone
// server it uses PUBLISH/SUBSCRIBE; on Redis Cluster, sharded pub/sub (SPUBLISH/SSUBSCRIBE,
// Redis 7), so a message travels only within the shard that owns the channel's slot instead
// of through every node (InvalidatorOptions.PubSub chooses otherwise).
//
// Pub/sub delivers at most once, so the Invalidator assumes it missed messages whenever its
// subscription was down: each time the subscription is established (first and after every
// loss, including a connection that answers no PING within two PingIntervals) it calls
// [Cache.MarkAllStale], and entries loaded before are never served as fresh again. While no
// subscription is live, freshness is bounded by InvalidatorOptions.OfflineFresh (default
// PingInterval): the cache is marked stale as soon as the loss is noticed and again every
// OfflineFresh until the subscription is back. On Redis Cluster the Invalidator reloads the
// client's slot map after every loss or failed attempt, so after a failover of the channel's
// master it re-subscribes on the promoted replica about the cluster's node timeout later,
// whatever the client's ClusterStateReloadInterval. An Invalidator that cannot subscribe
// logs it, reports it in [InvalidatorStats] and in the error of [Invalidator.Ready].
//
// # Key layout in Redis
//
// The cache keeps nothing in Redis. The Invalidator uses one pub/sub channel,
// InvalidatorOptions.Channel (default "celebrity:l1cache:invalidate"); channels are not keys
// and occupy no slot, but a shard channel is served by the shard that owns the slot of its
// name. Messages are "2 k <instance-id> <nonce> <key>" (drop a key) and
// "2 a <instance-id> <nonce>" (drop every key); version-1 messages of earlier releases
// ("1 k <instance-id> <key>", "1 a <instance-id>") are still applied.
//
// # What is assumed of Redis
//
// Nothing durable. Pub/sub delivers at most once to the subscribers connected at the time;
// Redis loses a message only for a subscriber whose connection breaks (including one it
// disconnects for exceeding client-output-buffer-limit pubsub), and the Invalidator treats
// every break as missed messages (MarkAllStale above). A publish that fails returns its
// error to the caller of Invalidate; the local drop has happened, and the other instances
// keep their copies until Fresh ends. Sharded pub/sub needs Redis 7; every instance of one
// cache must use the same kind of pub/sub (a fleet moving from global to sharded pub/sub
// sets PubSubGlobal until every instance runs a release that knows both).
//
// # ACL
//
// The Cache itself never talks to Redis. The Invalidator's user needs its Channel and the
// pub/sub commands, and no key: "&<channel> +publish +subscribe +unsubscribe +spublish
// +ssubscribe +sunsubscribe +ping" (PUBLISH and SUBSCRIBE on global pub/sub, SPUBLISH and
// SSUBSCRIBE on sharded pub/sub; PING checks a silent subscription), where <channel> is
// InvalidatorOptions.Channel, celebrity:l1cache:invalidate by default. On Redis Cluster the
// Invalidator also reloads the client's slot map, with the commands every go-redis cluster
// client's user has anyway (CLUSTER SLOTS). [ACLRule] returns the rule for an Invalidator's
// InvalidatorOptions, as ACL SETUSER arguments; the package's tests run once as a user holding only it, for a channel
// pattern covering every test's channel (CELEBRITYTEST_ACL=l1cache).
package l1cache
