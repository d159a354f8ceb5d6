// Package hotkeys finds the celebrity before it melts a shard: the keys that take an
// outsized share of the traffic, and the shards that take an outsized share of the load.
//
//	d, err := hotkeys.New(hotkeys.Options{
//		HotShare: 0.2,
//		Shard:    shards.Shard,   // *hotkeys.ClusterShards, or a routing lookup
//		OnHot:    func(ev hotkeys.KeyEvent) { _ = r.Promote(ctx, ev.Key) }, // r: a *replicas.Replicator
//	})
//	if err != nil { ... }
//	defer d.Close()
//	// on the request path:
//	d.Observe(key)
//	// in a metrics exporter:
//	snap := d.Snapshot()
//
// # The problem
//
// Average CPU and total requests per second look fine exactly when one shard is dying: a
// single key always hashes to one owner, so one viral post at half of the traffic sends
// half of the requests to one master while the others idle. The skew factor (the busiest
// shard's load over the mean shard load: 80k against a 10k mean is 8) and the share of the
// heaviest keys say what averages hide. A host must see a hotspot before it can isolate it
// (l1cache), spread it (replicas) or move it (migrate).
//
// # What the Detector does
//
// The host calls [Detector.Observe] (or [Detector.ObserveCost] with bytes or microseconds)
// on its request path. A call is sampled with probability Options.SampleRate; the
// sampled-out path draws one number from the runtime's per-thread generator and returns,
// without lock, clock read or allocation. A sampled call updates a heavy-hitters sketch of
// the current sub-window. [Detector.Top] merges the sub-windows of the sliding window and
// returns the heaviest keys with their estimated count, rate, share and error bound.
// [Detector.Evaluate], run by an owned goroutine every Options.EvalInterval, turns keys hot
// above Options.HotShare or Options.HotRate and cools them once they have stayed below the
// lower Options.CoolShare and Options.CoolRate for Options.Hold; Options.OnHot and
// Options.OnCool run outside every lock. [Detector.ShardView] attributes the sampled load to
// shards through Options.Shard: [ClusterShards] maps keys to Redis Cluster masters through
// the slot map, and a routing table's lookup works the same way. [Detector.Snapshot] and
// [Detector.Stats] feed a metrics exporter.
//
// # The sketch: Space-Saving over a ring of sub-windows
//
// Each sub-window holds a weighted Space-Saving summary (Metwally, Agrawal, El Abbadi, 2005)
// of Options.Capacity keys, split into stripes by key hash so that concurrent samples rarely
// share a lock. Space-Saving was chosen over HeavyKeeper and Count-Min-plus-heap because
// its guarantee is deterministic and per key: every count overestimates the sampled weight
// by at most its recorded error, and that error is at most total/capacity, so a key above
// that share is always tracked, and the counts sum exactly to the sampled total (shares
// need no separate counter). On skewed traffic the heaviest keys enter early and are never
// evicted, so their counts are nearly exact. HeavyKeeper needs less memory for the same
// recall in very small sketches, but it underestimates probabilistically, draws extra
// random numbers on every update and still needs a heap for the top k; Count-Min
// overestimates every key by collisions with the whole tail, which ranks keys poorly when
// the tail is heavy (Zipf exponents below 1). With sampling already adding statistical
// noise, a sketch whose own error is bounded and reported keeps the estimate honest:
// Count/SampleRate ± Error plus sampling noise.
//
// The window is a ring of Options.Buckets sub-windows rather than decaying counts: a
// sub-window older than the window is dropped whole, so nothing older than Options.Window
// counts and "hot within one window" means what it says. A reading covers between
// Window-Window/Buckets and Window of history; rates divide by the history covered, but by
// no less than one sub-window, so a detector a few milliseconds old never reports a burst
// as millions per second.
// Memory is Buckets×Capacity entries plus a fixed index, whatever the number of distinct
// keys; tracked keys are retained strings (at most Buckets×Capacity of them).
//
// # Guarantees
//
//   - Observe never blocks on I/O and is safe for concurrent use; its sampled-out path never
//     allocates, and its sampled path does not allocate in steady state.
//   - Within one sub-window, a key whose sampled weight exceeds its stripe's weight divided
//     by the stripe's capacity is tracked, with a count at most that much too high (about
//     1/Capacity of the sub-window's load when keys spread evenly over the stripes).
//   - Hot and cool decisions, MinSamples included, use a key's guaranteed weight (its count
//     minus its error bound), so a key seen once in a stream of distinct keys, whose count
//     is about its error, is never hot.
//   - Sums saturate at the largest uint64 instead of wrapping, so huge ObserveCost weights
//     keep every share in [0, 1].
//   - Hot and cool events are decided under the detector's lock, numbered (KeyEvent.Seq)
//     and delivered after it is released; a key cools once per hot period, Hold after it
//     last fell below every cool threshold, and never flaps between the two thresholds.
//   - Close stops the owned goroutine; nothing else runs in the background.
//
// # Redis
//
// The Detector keeps no state in Redis and issues no command. [ClusterShards] reads the
// slot map (CLUSTER SLOTS) on creation and on Refresh. [Probe] reads the server's own view
// of key popularity: OBJECT FREQ, which needs an LFU maxmemory-policy (allkeys-lfu or
// volatile-lfu) and otherwise fails with [ErrUnsupported]; CONFIG GET maxmemory-policy and
// COMMAND INFO HOTKEYS for [Probe.Capabilities]; SCAN for [Probe.ScanTop]. Redis 8.6's
// HOTKEYS sessions are detected but not driven. Nothing is assumed of durability: every
// figure is an estimate over recent traffic.
//
// # ACL
//
// The Detector needs no Redis user. [ClusterShards] needs CLUSTER SLOTS, which every
// go-redis cluster client's user has anyway (+cluster|slots). [Probe] cannot work under a
// user limited to a library prefix: hotkeys has no prefix of its own, the keys it looks at
// are the host's. Its rule is "%R~<pattern> +object|freq +scan +config|get +command|info":
// read-only access to the keys it probes, because OBJECT FREQ is refused (NOPERM) for a key
// outside the user's patterns; SCAN for ScanTop, which is not filtered by key patterns (it
// returns every key name of a node, so granting it reveals the names of all keys), so give
// ScanTop a Match inside the readable pattern or it fails at the first key outside;
// CONFIG GET maxmemory-policy and COMMAND INFO for Capabilities only (Freq and ScanTop
// detect a missing LFU policy from OBJECT FREQ's own error). "%R~" needs Redis 7; a host
// that grants "~<pattern>" instead gives write access too. [ACLRule] returns the rule for
// ScanTop's ScanOptions (their Match is the pattern), as ACL SETUSER arguments; the package's tests run once with their Probes as a
// user holding only it (CELEBRITYTEST_ACL=hotkeys) and the host's own traffic as the
// administrator.
package hotkeys
