// Package ratelimit provides rate limits shared by a fleet, in three modes that name their
// cost: Exact (one Redis call per request), Leased (no overshoot, Redis load independent of
// the request rate) and Approximate (a stated overshoot, one call per sync).
//
//	lim, err := ratelimit.New(rdb, ratelimit.Options{
//		Limit: ratelimit.Limit{Rate: 10_000, Period: time.Second},
//		Mode:  ratelimit.Leased,
//	})
//	if err != nil { ... }
//	defer lim.Close()
//	res, err := lim.Allow(ctx, "merchant:42")
//	if err == nil && !res.Allowed { /* 429, Retry-After: res.RetryAfter */ }
//
// # The problem
//
// A rate limit is itself a hot key. The usual limiter runs one script on one Redis key per
// limit for every request, so a merchant doing 500,000 requests per second sends all of them
// to the one master holding its limit key: the limiter melts the shard it was meant to
// protect. And "limit" hides two problems: a strict limit (never more than N) and a soft one,
// where admitting a little more is acceptable if the overshoot is known. This package makes
// both choices explicit: the mode (who decides, at what Redis cost) and the window (what
// "Rate per Period" means).
//
// # Windows
//
//   - GCRA (Exact mode's default): emission interval T = Period/Rate; in any interval of
//     length x at most Burst + x/T requests are admitted (so up to Burst + Rate in one
//     Period). Remaining, RetryAfter and ResetAfter are exact.
//   - Sliding (the default of the other modes): Period is cut into SubWindows sub-windows
//     of length d = Period/SubWindows, aligned to Unix time on the Redis server's clock,
//     and the server counts over SubWindows+1 consecutive sub-windows. Any interval of
//     length Period touches at most SubWindows+1 sub-windows, so it never sees more than
//     Rate admitted. The price: budget comes back one sub-window late, so a steady demand
//     at exactly Rate gets about Rate·SubWindows/(SubWindows+1) (raise SubWindows to
//     shrink it).
//   - Fixed: one counter per aligned Period. At most Rate per window, but an interval of
//     length Period straddling a boundary can see 2·Rate: Rate admitted at the end of one
//     window and Rate at the start of the next.
//
// # Modes and their guarantees
//
// Exact: every request runs one script on the key's master (gcra.lua, or take.lua for
// Sliding and Fixed windows). Admissions never exceed the window's bound, whatever the
// number of instances. take.lua is idempotent by request ID (a retry after a lost reply
// gets the original answer; one answered after its sub-window ended is reported as not
// admitted). gcra.lua carries no request ID: a go-redis retry after a lost reply counts
// the request twice, which under-admits by one and never over-admits. Redis load: one call per request on one master per key.
//
// Leased: the window's budget is split into Slots budget slots, each holding
// Rate/Slots (the remainder to the first slots) under its own hash tag. An instance takes a
// chunk from one slot in one round trip (take.lua) and admits locally until the chunk is
// spent; when a slot is empty it asks the next. A chunk is granted in the server's current
// sub-window and counted there, and the instance uses it only before
// sent + (sub-window end - server now), measured on its own clock from the moment it sent
// the request: the server read its clock after that moment, so the chunk's use ends no later
// than its sub-window on the server. Hence:
//
//   - No over-admission: admissions in a sub-window are at most the cells granted in it,
//     and every slot keeps its grants over the summed sub-windows within its share
//     (take.lua's invariant), so the window's bound holds as in Exact mode. This holds for any number of instances, for instances paused (SIGSTOP,
//     GC) for any time while holding a chunk or a grant in flight, and for lost replies.
//   - Idempotent grants: every chunk request carries a request ID (instance token from
//     crypto/rand + counter) and is sent again, unchanged, when the connection fails; so is
//     a go-redis retry. take.lua answers a repeated ID with the original grant, so a lost
//     reply never grants twice (a grant whose reply comes too late is dropped: budget
//     unused, never budget doubled).
//   - Bounded under-admission: budget is lost only as cells left in a chunk when its
//     sub-window ends. Each instance holds at most one live chunk per key, of at most
//     MaxChunk cells, so per sub-window at most N·MaxChunk cells go unused for N instances
//     using the key (and at most Rate). Fragmentation costs nothing more: a slot grants
//     partial chunks down to the request's cost, and an instance asks every slot before it
//     denies.
//   - Adaptive chunks: an instance asks for its recent request rate for the key (its
//     demand, admitted or not) times what is left of the current sub-window, between the
//     request's cost and MaxChunk. An idle instance's first request asks for its own cost,
//     so instances that see little traffic hold little.
//   - Redis load: one call per chunk, spread over the slots' masters, plus one call per slot
//     per instance and refill time while the budget is spent (an empty slot is not asked
//     again before the reply said budget frees). At saturation that is about
//     1/MaxChunk calls per admitted request.
//
// A slot whose master does not answer within Options.SlotTimeout (default 250ms) is left:
// the request asks the next slot, and this instance skips the silent slot until that
// request ends (the master answers, or the client's own timeouts end it), so a stopped
// master costs one instance one wait of SlotTimeout, not one per request; the other slots
// keep serving (4 instances, 3 slots, one master stopped for 4s: 96–99% of the live slots'
// capacity admitted, no request past its deadline).
// A request fails only when no slot answered. A grant that arrives after its sub-window
// ended (a round trip longer than what was left of it) is never spent, and the slot is
// asked again, in its next sub-window (Stats.LateGrants counts them). A denial always
// carries a positive RetryAfter. A stopped master that resumes runs its queued take.lua calls late; their
// grants count in the sub-window they ran in, and their replies find nobody, so they are
// never spent (under-admission).
// So is the grant of a chunk request that ran but lost the reply to every one of its
// Options.Attempts sends: the instance asks the next slot, and that grant, at most MaxChunk
// cells, is never spent.
//
// With Options.HotKeys, keys the detector does not report hot take exactly their cost from
// one slot per request (Exact behaviour on the same budget slots), so only hot keys hold
// chunks, and a key can change between the two at any time without overshoot.
//
// A per-process detector cannot see a key that is hot only in the fleet's sum (four
// instances at 40 requests/s each). With Options.HotRate instead, the decision is the
// fleet's: a key takes the exact path until the fleet's rate for it reaches HotRate, then
// leases on every instance, and goes back once the rate has stayed under HotRate/2 for
// HotCoolDown Periods. The limit stays exact through every switch, since both paths take
// from the same budget slots (a chunk held at a switch back is left unspent). The rate
// costs no extra Redis command: take.lua counts requests per key in each slot's sub-window
// hashes (field c) and returns the count of the last span+1 sub-windows with every reply. On
// the exact path each request adds 1 in the first slot it asks (the start rotates, so the
// requests spread evenly over the slots); on the leased path a chunk request adds the
// requests this instance served since its last one. From a reply of slot j,
//
//	fleet rate ≈ Slots · seen_j / (span·sub + elapsed),   span = SubWindows+1 (1 when Fixed)
//
// with elapsed the part of the current sub-window gone, so the average covers between
// Period+sub and Period+2·sub (Period and 2·Period when Fixed): a step to rate R reaches
// HotRate after about Period·HotRate/R. Its error: sampling (a slot sees about 1/Slots of
// the requests: relative error about sqrt(Slots/seen_total)); on the leased path, the
// imbalance of the instances over the slots they ask (with few instances a slot's share is
// uneven; the factor 2 between promotion and demotion absorbs up to that much); a denied
// request that go-redis sends again after a lost reply counts twice (a granted one is
// answered as a duplicate and counts once); requests whose chunk request lost every reply,
// and those of processes running a version without the count (a rolling upgrade: old
// processes ignore the field, new ones see only their own requests), are not counted. The
// estimate decides a path, never an admission. A key with no requests at all keeps its
// state until KeyIdle drops it; Stats.Leasing, HotSwitches and ColdSwitches count the
// switches.
//
// Approximate: each instance counts its admissions per sub-window and syncs them
// (sync.lua, idempotent by instance and sequence number) at most every SyncInterval, or
// earlier when MaxUnsynced admissions are waiting; the reply is the shared count of the
// current window, and the instance admits while that estimate plus its unsynced
// admissions stays within Rate. Let N be the number of instances using the key, r the
// highest admission rate of one instance and RTT the round trip of a sync. In any interval
// of length Period (any aligned window when Fixed):
//
//	admitted <= Rate + (N-1) · U,   U = min(MaxUnsynced, r·(SyncInterval + RTT))
//
// Take the instance whose last sync read in the window came last: its estimate included
// every count synced before then, and its decision kept estimate + own unsynced within
// Rate; every other instance can only add the admissions it had not synced yet, at most U.
// While an instance's syncs fail (Options.Attempts sent, no reply) it decides on its last
// estimate, as between syncs, and its unsynced admissions stay within MaxUnsynced: U is
// MaxUnsynced for it, and only a request that would pass MaxUnsynced gets the sync's error
// (Stats.SyncErrors counts the failures; the counts go with the next sync, once each).
// With the defaults (MaxUnsynced = Rate/100) the overshoot is at most (N-1)% of Rate. The
// seed's example, ten instances each allowing 100/s on their own, is N=10 with U=100: up to
// 1,000/s. Redis load: at most one call per instance per SyncInterval per key, plus one per
// MaxUnsynced admissions.
//
// # Key layout
//
// The layout may change between versions: tools read a key's use of its limit with
// Limiter.Peek, not from these keys.
//
// Under Options.Prefix (default "celebrity:ratelimit:"), with <key> the caller's key
// verbatim (any bytes, 1..MaxKeyBytes), <t> a hash tag chosen by the package and <lim> the
// limit: "<Rate>/<Period in ms>" followed by "g<Burst>" (GCRA), "s<SubWindows>" (Sliding)
// or "f" (Fixed), such as "600/60000s10":
//
//	<prefix>{<t>}:g:<lim>:<key>                  GCRA: the theoretical arrival time (string, µs)
//	<prefix>{<t>}:e:<lim>:<key>:0:<index>        Exact Sliding/Fixed: hash of sub-window <index>:
//	                                             n (cells granted), r:<request id> (its grant)
//	<prefix>{<t_j>}:l:<lim>:<key>:<j>:<index>    Leased: the same, for budget slot j, and
//	                                             c (requests counted, with HotRate)
//	<prefix>{<t>}:a:<lim>:<key>:<index>          Approximate: hash, n = shared count
//	<prefix>{<t>}:a:<lim>:<key>:s                Approximate: instance -> last applied sequence
//
// Because the limit is part of every key, two limits on one key (per second and per minute
// on one merchant) count separately under one prefix.
// <t> is a short tag whose hash slot is xxhash64(key) mod 16384; <t_j> lies in the j-th of
// Slots equal ranges of the hash slots (offset by the key's hash), so with Slots equal to
// the number of masters each slot of a key is on a distinct master of a cluster whose
// masters own equal contiguous ranges. The tags depend only on the key and Options, never
// on the topology, so every instance uses the same keys through resharding and failover.
// Because the tag comes first, a key containing '{', '}' or ':' cannot change a slot or
// collide with another key. Each script touches one slot: a slot's sub-window hashes share
// its tag. Sub-window hashes expire one window after their sub-window.
//
// # What is assumed
//
// Redis 5+ (scripts with TIME, effects replication). Instances and Redis servers keep
// real time at the same rate (leases are measured on the instance's clock from the moment
// of sending); Sliding accounting is aligned to the Redis servers' clocks, which should
// agree (NTP) when a key's slots live on several masters. Approximate mode is too, whatever
// the instances' clocks say: an instance counts its admissions in the server's sub-windows
// through an offset to the server's clock that each sync bounds (the server read its clock
// between the sync's sending and its reply) and moves by the least that fits, so clocks
// that agree keep offset 0; its first admission on a key waits for the key's first sync.
// A sync bounds the offset to within its round trip, so an instance whose clock is off may
// count an admission made within a round trip of a sub-window boundary in the neighbouring
// sub-window, and exceed the bound below by those admissions (2 instances, Rate 300 per
// 500ms, bound 303, one instance 50ms or 250ms behind, 100ms ahead or 1s behind: 303–304 in
// the worst window, against 399–657 before the offset). A host clock stepped between two
// syncs can misfile the counts the instance makes until its next sync (at most MaxUnsynced).
// All instances of a limit use the same Options. Durability: budgets live in the masters' memory; a server
// that loses acknowledged writes (a failover under asynchronous replication, a restart
// without AOF, a restore from an earlier snapshot or backup) can forget grants and counts
// of the current window and so over-admit by at most what it forgot, for one window: a
// restore to the start of a window after its whole budget was spent admits it again
// (2·Rate in that Fixed window, in Exact, Leased and Approximate modes). A coordinated failover (CLUSTER FAILOVER) loses nothing. A request admitted by
// a decision is served after it: a process paused between decision and serving serves
// late, as with any limiter.
//
// # Deadlines and client options
//
// Every call returns by its ctx's deadline or cancellation, whatever the client's options:
// a stock go-redis client does not end a read when its context ends (ContextTimeoutEnabled
// is off by default), so the package waits for each round trip itself and leaves a call
// that outlives the caller's ctx to finish in the background; its outcome is then unknown,
// as after a lost reply, which every script tolerates.
// A stock client (redis.Options{Addr: …} or redis.ClusterOptions{Addrs: …}) suits every
// mode. The package resends chunk, take and sync requests itself (Options.Attempts, with
// the same request ID), so go-redis's own retries (MaxRetries, 3 by default) add only their
// backoff after a lost connection; set MaxRetries: -1 to leave retries to the package in
// Leased, Approximate and Exact Sliding/Fixed modes. GCRA carries no request ID: a go-redis
// retry after a lost reply counts the request twice (under-admission by one, never over).
//
// # ACL
//
// The client's user needs key access to Options.Prefix and the scripting commands with every
// command the scripts call (Redis checks those too): for the default prefix,
// "~celebrity:ratelimit:* +evalsha +eval +get +set +hget +hset +hmget +hincrby +pexpire
// +pexpireat +time". Scripts touch derived keys of their declared key's slot, so the key
// pattern must cover the whole prefix. No other command and no channel is used. [ACLRule]
// returns the rule for a Limiter's Options, as ACL SETUSER arguments; the package's tests run once as a
// user holding only it (CELEBRITYTEST_ACL=ratelimit).
//
// # Memory
//
// Local state per key lives in a bounded store (MaxKeys, least recently used dropped;
// dropped after KeyIdle unused). Dropping a key's state forgets its chunk (unused cells:
// under-admission) or, in Approximate mode, its unsynced counts (at most MaxUnsynced more
// overshoot for that key).
package ratelimit
