// Package celebrity is one read-through cache over the host's Redis that finds its own hot
// keys ("celebrities") and defends them, fleet-wide.
//
//	posts, err := celebrity.New(rdb, func(ctx context.Context, id string) (celebrity.Versioned[Post], error) {
//		p, version, err := db.Post(ctx, id) // the row, its version, or celebrity.ErrNotFound
//		return celebrity.Versioned[Post]{Value: p, Version: version}, err
//	}, celebrity.Options[Post]{})
//	if err != nil { ... }
//	defer posts.Close()
//	p, err := posts.Get(ctx, "post:42")
//	// after the database write of post 42 at version 7:
//	err = posts.Set(ctx, "post:42", p, 7)
//
// # The problem
//
// A hot key hashes to one Redis node. The library's parts each solve one side of it —
// l1cache (an in-process L1), replicas (a fleet-wide fill lease and N copies on distinct
// masters), hotkeys (detection) — but composing them is where correctness breaks: three
// "not found" values, a generic cache over a []byte API, a safe write order that nothing
// enforces, detection at the wrong layer (raw requests, most of which the L1 absorbs) and on
// one instance only (a key read once a second by each of 1,000 instances puts 1,000 reads a
// second on one node, and no instance sees it hot).
//
// # The guarantee
//
//   - Cache.Get serves from the L1 (stale-while-revalidate, early refresh, stale-if-error,
//     negative caching, one load per key per instance); a miss reads Redis (one copy of a hot
//     key, else the logical key) and, when Redis holds nothing, the Loader, once for the whole
//     fleet (the replicas lease). A value is never older than Fresh+Stale (+StaleIfError while
//     loads fail) after it was read from Redis.
//   - Cache.GetMany reads a page of keys with the same guarantees per key: the L1 first,
//     then Redis in one pipeline (one round trip per master), then the source for what Redis
//     lacks, once per key for the fleet, in one call of Options.BatchLoader; a key another
//     GetMany on the instance is fetching is waited for, not fetched again.
//   - Cache.Set and Cache.Delete, called after the host's database write, carry out the safe
//     order: the logical key and the copies in Redis (set-if-newer by version; a tombstone for
//     Delete), then the fleet invalidation (pub/sub), then this instance's entry. Every step
//     is idempotent, so a retry with the same version completes a write. When Set returns nil,
//     Redis holds that version or a newer one everywhere a reader looks, and every instance
//     drops its older copy when the invalidation arrives; an instance whose subscription was
//     down marks all its entries stale when it comes back, and in every case serves the older
//     version no longer than Fresh+Stale. A step that fails returns a *WriteError naming it
//     and bounding what the fleet may serve meanwhile.
//   - One ErrNotFound: celebrity.ErrNotFound, l1cache.ErrNotFound and replicas.ErrNotFound are
//     one value, so errors.Is matches a miss from any layer, and a miss is cached as absence
//     (NegativeTTL), never as a load error.
//
// # The closed loop: detect, promote, spread, demote
//
// The loop runs in every Cache (its machinery is internal/fleet); the options named in this
// section are the fields of Options.Loop (LoopOptions).
//
// Each instance observes its Redis-level reads (L1 misses and refreshes, which read copies of
// hot keys), not its requests: that is the load that hurts a node. Its local rates cover the
// last half ReportInterval (the promote decision's window; demotion is governed by Hold); an
// instance younger than that divides its reads by the whole half interval, not by the little
// history it has, so a fleet started at once does not report a few reads as a hot key. Once per
// ReportInterval, at its own random moment of the interval, it adds the rates of its ReportTop
// heaviest keys (those at or above ReportMinRate) to a summary of that interval in Redis,
// spread over SummaryShards keys whose slots are spread over the slot space, so over the
// masters (each instance writes one, chosen by its ID): the summary is never a hot key itself.
// A key not yet hot that reaches EarlyReportRate locally is reported at once instead, in at most
// one early report per interval; no key counts twice.
//
// A fleet larger than ReportsPerInterval reports in turns, so that its reports do not grow with
// it: the leader estimates the fleet's size N from the reports (each stands for K instances)
// and writes it where every instance's poll reads it; each instance then makes its regular
// report once every K = ⌈N/ReportsPerInterval⌉ intervals, its rates times K, except for a key it
// reads at PromoteRate/K or faster, which it reports every interval at its own rate (one
// instance's reads never count K times towards a promotion). The leader scales each interval's
// sampled rates by N over the instances that interval's reports stood for, since the turns
// split the fleet unevenly. It states N on the hot-set channel (when it moved by a tenth, and
// every 10 intervals) and in an expiring key its polls renew; a size no leader restated
// within 30 intervals lapses, and the fleet reports every interval again (as a leader of a
// release without turns needs: it reads no sampled rates).
//
// With HotReportEvery, hot keys are reported by a rotating share of the fleet. With
// SlowReportEvery, a slow lane adds what the regular reports leave out: once per interval each
// instance adds up its reads over the last interval of the keys it reads under ReportMinRate
// (lukewarm), and once every SlowReportEvery intervals, on its turn, adds the average rates of
// the ReportTop/4 heaviest of them (read at least twice) to its report; the leader adds to each
// key's rate the slow reports of the last SlowReportEvery intervals, one per instance, so a key
// that each of 1,000 instances reads once a second counts 1,000 reads a second (a moving
// average: each report averages the SlowReportEvery intervals before it, so a lukewarm key is
// promoted and demoted up to 2×SlowReportEvery-1 intervals late).
//
// One instance, holding a leader lease, sums the summary of each interval once it ended
// (promotions and demotions), and sums the interval under way (promotions only: a partial sum
// never overstates a rate) as soon as a report nudges it — the report whose addition takes a
// key's sum on its shard across PromoteRate/SummaryShards publishes the nudge in the same
// script (only for a key the reporter does not apply as hot: a hot key needs no promotion) —
// and then every quarter interval until that interval ends. It makes at most one such partial
// sum per quarter interval, however many reports nudge it (a nudge in a quarter that had one
// waits for the next quarter's), so its evaluations per interval are at most five.
//
// It changes the hot set in one fenced script: a key whose fleet-wide rate reaches PromoteRate
// is promoted, and so is, with PromoteShare, a key whose rate reaches that share of its
// master's commands per second (the leader reads each master's INFO stats once every 5
// intervals) and at least ShareMinRate; a fleet-decided member whose rate stays under
// DemoteRate for Hold is demoted (two thresholds and a hold: no flapping).
//
// A member's reported rate counts only its reads inside the interval reported (over at least
// half an interval), not the local window's look-back into the previous one. So a member that
// stops being read is demoted by the evaluation of the interval ⌈Hold/ReportInterval⌉ intervals
// after the one that held its last Redis-level read (the last request's, or the one
// refresh-ahead after it, within RefreshAhead): at most Hold (rounded up to whole intervals) +
// ReportInterval + ReportInterval/20 (when that evaluation starts) plus the evaluation's own
// time after that read (with SlowReportEvery, a lukewarm tail may add up to SlowReportEvery
// intervals). And Hold is not a minimum after the last read: it counts whole intervals under
// DemoteRate, and the interval that holds the last reads counts when its rate is under
// DemoteRate (a key read at a fading rate, or one that stopped early in it), so the demotion
// may come as soon as Hold − ReportInterval after the last read (2 s after it with Hold 3 s and
// 1 s intervals), never sooner than that after the fleet's rate fell under DemoteRate.
//
// The hot set is versioned; the script that changes it announces the change on the hot-set
// channel in the same step (the new version and every key it changed, with the record that
// decided it), and the leader publishes the version again once per interval as a heartbeat. An
// instance that applied the version before an announcement applies the change from the
// announcement itself, without a command; one that missed a version (a lost message, a
// subscription that was down) reads the whole set, at once on the next announcement or
// heartbeat.
//
// An instance that hears the channel polls the version only once per PollInterval (default 60
// intervals); one that has heard nothing for 3 intervals (its subscription is down, the
// leader's heartbeat is late, or the leader is gone) polls, which is also how a new leader
// takes over: every interval while a poll finds no live leader or a version it had not applied,
// and otherwise (another instance's live lease, the version unchanged: the heartbeat is only
// late) not again before that lease would expire, 3 intervals at most, so a slow leader does
// not make the whole fleet poll every interval. The poll reads the version, so a change the
// channel did not deliver is read by the next poll. So a subscribed instance applies a change
// as soon as the announcement arrives: it warms the key's copies before its reads use them
// (replicas.Promote) and refreshes the key ahead of its L1 expiry while it is read, so a hot
// key never misses. Cache.Promote and Cache.Demote change the hot set by hand (a launch known
// in advance); a manual member is never demoted by the fleet. Options.OnEvent receives each
// change as this instance applies it, with the fleet-wide rate that decided it.
//
// On a standalone server copies spread nothing, so replication is off there (logged once);
// detection, the hot set and refresh-ahead still run.
//
// # Key layout in Redis
//
// The layout may change between versions: tools read the fleet's hot set with ReadHotSet,
// not from these keys. The host's own keys are never read or written, even when they have
// a logical key's name.
//
//	<prefix>r:{<tag>}k:<key>               the key's record (replicas' primary: version, value)
//	<prefix>r:{<tag_i>}c:<key>             copies of hot keys; replicas' leases and lists too
//	<prefix>{<prefix>hot}meta              hash: version (of the hot set), epoch (of the leader)
//	<prefix>{<prefix>hot}leader            the leader lease: "<instance ID>/<nonce>", 3 intervals
//	<prefix>{<prefix>hot}members           hash: key -> "a|<rate>|<ms>" (fleet) or "m|…" (manual)
//	<prefix>{<prefix>hot}demoted           hash: key -> "<rate>|<ms>" of the last demotions
//	<prefix>{<prefix>sum<s>}:<interval>    one shard of one interval's summary, 3 intervals
//	                                       (SlowReportEvery+2 with the slow lane)
//	channels <prefix>inv (invalidations) and <prefix>hot (hot set versions)
//
// prefix is Options.Prefix (default "celebrity:cache:").
//
// # What is assumed of Redis
//
// A cache: nothing durable. Redis 7 (replicas' scripts). Pub/sub is at most once; a lost
// invalidation is bounded by Fresh+Stale; a lost hot-set announcement is repaired by the next
// heartbeat (one interval), and an instance whose subscription is down learns a change within
// 4 intervals (its first poll comes at most 4 intervals after the last message it heard, the
// next ones at most 3 intervals apart; a loaded machine's delays add to this). A lost leader
// is replaced within one interval after its lease expires (at most 4 after its last renewal).
// A master that loses the hot set's last change (a restore from an earlier backup, a
// failover under asynchronous replication) makes its version number again for another
// change: every version carries a vid, which announcements, heartbeats and polls compare
// with the number, so an instance that applied the lost change reads the fleet's set like
// any missed change. The summary
// assumes the instances' clocks agree within a fraction of ReportInterval (an interval is named by
// wall-clock time). The loop's own commands per interval: at most one report (two with an
// early one) per instance that has a key at or above ReportMinRate on its turn (every interval
// in a fleet of up to ReportsPerInterval), or a key at PromoteRate/K or faster, or, with
// SlowReportEvery, whose slow-lane turn it is (once every SlowReportEvery intervals), one poll
// per instance per PollInterval (while it hears no heartbeat: one per 3 intervals while a live
// leader's heartbeat is late, one per interval while there is no leader or its polls find
// changes it missed), SummaryShards reads (at most 4×SummaryShards more in an interval with
// nudges, whatever their number, and with SlowReportEvery up to
// (SlowReportEvery-1)×SummaryShards more once when the leader takes over or skipped an
// interval), with PromoteShare one INFO per master every 5 intervals, one lease renewal and
// one heartbeat by the leader, and, per hot-set change, one by the instance that makes it (the
// announcement is published by the same script) and one (the hot set read in one script) by
// each instance that missed the version before. In commands per second, with N instances, M =
// ReportsPerInterval, H the instances that read some key at PromoteRate/K or faster (K =
// ⌈N/M⌉), S = SummaryShards, I = ReportInterval and P = PollInterval, in a steady state (a live
// leader, no change, without SlowReportEvery and PromoteShare):
//
//	loop/s ≤ (min(N, M+H)·(1+e) + S·(1+4ν) + 2)/I + N/P
//
// where e is 1 with EarlyReportRate (an early report) and 0 otherwise and ν is 1 in an
// interval with a nudge and 0 otherwise. The number of keys reported does not change the count
// (a report carries up to ReportTop keys in one command). With the defaults (M 32, S 4, I 1 s,
// P 60 s): 4 instances, at most 4 + 20 + 2 = 26 commands/s; 1,000 instances whose reads are
// spread thin (H = 0), at most 32 + 20 + 2 + 17 = 71, and 39 in an interval without a nudge.
//
// # ACL
//
// The client's user needs the Replicator's rule for the prefix <prefix>r: (see replicas),
// the Invalidator's for the channel <prefix>inv (see l1cache), the hot set's and the
// summary's keys, the hot-set channel and the commands of the hot-set scripts, the leader's
// summary reads, the subscription and ReadHotSet; for the default prefix,
// "~celebrity:cache:r:* ~celebrity:cache:{celebrity:cache:hot}* ~celebrity:cache:{celebrity:cache:sum*
// &celebrity:cache:inv &celebrity:cache:hot +evalsha +eval +get +set +del +pexpire +pttl
// +rpush +time +blpop +multi +exec +hget +hgetall +hset +hsetnx +hdel +hincrby +hincrbyfloat
// +hlen +publish +subscribe +unsubscribe +spublish +ssubscribe +sunsubscribe +ping", and
// "+info" with Options.Loop.PromoteShare (the leader reads each master's INFO stats). [ACLRule]
// returns the rule for a Cache's Options, as ACL SETUSER arguments; the package's tests run
// once as a user holding only it, with PromoteShare (CELEBRITYTEST_ACL=celebrity).
package celebrity
