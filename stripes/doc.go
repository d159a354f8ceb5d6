// Package stripes provides exactly-once striped counters that survive resizing.
//
//	c, err := stripes.New(rdb, stripes.Options{Name: "course:72:views", Stripes: 16})
//	if err != nil { ... }
//	defer c.Close()
//	res, err := c.Add(ctx, stripes.Event{ID: viewID, Time: viewedAt}, 1)
//	// On error, retry with the same Event; res.Applied reports a first count.
//	n, err := c.Sum(ctx)
//
// # The problem
//
// A view counter on a viral course can take most of its shard's writes: one key always
// lives on one master. Splitting it into stripes (partial counters on different masters,
// summed on read) spreads the writes, but brings two problems. A retried event must not
// count twice, so deduplication has to live next to the stripe the event went to. And
// changing the stripe count moves events between stripes, so a retry after a resize could
// land in a stripe that never saw the first attempt. This package solves both with per-stripe
// dedup records and stripe-layout generations.
//
// # The guarantee
//
// Every accepted unique event adds its delta exactly once, in exactly one stripe, across
// concurrent calls, lost replies, go-redis retries and stripe-count changes, provided that
// every attempt carries the same [Event] (ID, Time, Gen) and arrives within DedupWindow of
// Event.Time (on the Redis server's clock). An attempt whose records may be gone gets
// [ErrTooOld] and changes nothing: one outside the window, give or take the slices described
// at Event.Time. Dedup records are 63-bit hashes of IDs (see "Collisions").
//
// [Counter.AddBatch] does the same for many events in one pipeline.
//
// An event's stripe is xxhash64(ID) % stripes of its generation (the project's hash
// contract). Its generation is fixed at its first attempt, one of two ways:
//
//   - By time (Event.Gen == 0): [Counter.Resize] gives every stripe of the closing
//     generation a boundary; an event goes to the oldest generation whose stripe for it has
//     no boundary or a boundary after Event.Time. Boundaries never change once set, and a
//     stripe's boundary is always later than every event it accepted, so every attempt of an
//     event derives the same generation, even through a client with an outdated layout
//     (closed stripes redirect it).
//   - Stamped (Event.Gen != 0): [Counter.Stamp] returns an Event carrying the current
//     generation and time; the host stores it and passes it unchanged on every retry. The
//     event goes to that generation regardless of boundaries, until it is sealed. Sealing
//     is timed from the boundaries, so a stamp taken from a layout cached across a Resize
//     (see Options.LayoutMaxAge) leaves its event less than a full window: a retry after
//     the seal gets ErrTooOld, never a second count.
//
// Do not mix the two for one event ID.
//
// A generation that is no longer the newest is sealed (by the background loop or
// [Counter.Seal]) one DedupWindow plus one slice after its boundaries: each stripe is frozen
// and returns its final value, and their sum is folded into the layout's base value once,
// keyed by the generation number. Later attempts of an event of a sealed generation get
// ErrTooOld. A sealed stripe still redirects events at or past its boundary, so a writer
// holding a layout read before the resize and the seal counts every fresh event: the stripe
// sends it on, the writer rereads the layout and finds the generation that owns it. A
// crash between freezing and folding is harmless: frozen stripes return the same values,
// and the fold happens once. Once a sealed generation's stripes have expired (one more
// window), Seal drops it from the layout document with its folded:<gen> and expiring:<gen>
// fields, keeping only the number of the newest dropped generation and its latest boundary,
// so late attempts still get ErrTooOld: the record stays as small as its live generations.
//
// # Reads
//
// [Counter.Sum] reads the layout and then every stripe of every unsealed generation in one
// pipeline. It is not a snapshot. With positive deltas only, successive Sums by one caller
// never decrease. With negative deltas, a concurrent reader may see an increment missed and
// a later decrement seen (or the reverse), so a Sum can lie below or above every value the
// counter held at one instant; once writers stop, Sum is exact. [Reader] caches the sum for
// dashboards: any number of concurrent reads within MaxStaleness cost one Sum.
//
// # Families of counters
//
// Per-item counters (views per post) share one [Family]: one value for any number of names
// with the same options. Each name is an ordinary counter (its own layout record and
// generations, created on first use), so everything above holds for each name. The family
// keeps the Counters of names in use in memory, at most FamilyOptions.MaxNames (least
// recently used dropped first) and none idle for IdleAfter; a dropped name costs nothing
// in memory but one layout read when it is used again. One background loop serves all
// names (no goroutine per name): it seals the old generations of names that have them
// (also of names dropped from memory meanwhile) and does adaptive striping.
// [Family.AddBatch] sends the events of many names in one pipeline, which a cluster client
// splits per master; [Family.Sum] and [Family.SumMany] serve values up to MaxStaleness old
// from memory.
//
// Adaptive striping: a new name gets Options.Stripes stripes (1 by default), so a cold
// name costs one hash (its home record, see "Key layout"), one dedup set per slice in use
// and its field in a births hash, and its Sum reads one stripe. With FamilyOptions.HotStripes
// set, the loop promotes a name whose write rate through this family (events Add and AddBatch
// counted per second over one Interval; a failed call, or a retry that finds its event already
// counted, is not a write)
// reaches HotRate, or that the host's [HotDetector] reports hot, to HotStripes stripes, and
// demotes it to Options.Stripes once it stayed below CoolRate (and not reported hot) for
// CoolAfter. Both are [Counter.Resize]: a new generation with boundaries, so exactly-once
// holds across every change, and the old generation is sealed one window later.
//
// The rate that decides is the fleet's: with HotRate set, each family also reports a name's
// writes to a count the fleet shares (one hash per name and window width, in the name's
// slot), once its unreported writes reach a quantum (HotRate × Interval / 8, at least 1) and
// at every round while the name is promoted, and reads back the fleet's count of the
// current and the previous window. A name is hot when its rate through this family or the
// fleet's reaches HotRate: three processes writing a name 40 times a second each, under
// HotRate 100, promote it on all three. A report carries a sequence number per family and
// name, so a retry after a lost reply counts nothing again. The cost follows the writes, not
// the number of processes: a name written w times a second in all costs about w / quantum
// reports a second (8 per Interval at HotRate), plus one read per process and round while
// it is promoted; a cold name written less than a quantum per process costs nothing. The
// window is Interval on each process's clock, so processes sharing names should share
// Interval and keep their clocks within a fraction of it. A name is demoted only by a
// family that saw it hot while holding it in memory (by its own rate or the fleet's), so a
// process that never saw it hot does not undo a promotion (a promoted name that every such
// family dropped from memory stays promoted until one of them sees it hot again and then
// cool). Every change is a generation, safe whoever makes it.
//
// # Key layout
//
// The layout may change between versions: tools read a counter's generations and stripes
// with ReadLayout or Counter.Layout, not from these keys.
//
// Under Options.Prefix (default "celebrity:stripes:"; "stripes:" before v0.2.0) and
// Options.Name:
//
//	<prefix>{<name>}:layout              hash: doc (JSON: live generations, stripe counts,
//	                                     tags, boundaries, dedup settings, birth token, floor),
//	                                     ver, base, folded:<gen>, expiring:<gen>, pruned;
//	                                     or a home record (below)
//	<prefix>{<tag>}:<name>:<gen>:<i>     hash: stripe i of generation gen: v (value), g, n,
//	                                     i, maxt (latest event time), end, sealed, d<r> (the
//	                                     dedup table state of a slice, in a ring of slots)
//	<prefix>{<tag>}:<name>:<gen>:<i>:e:<slice>:<bucket>
//	                                     set: one bucket of the stripe's dedup records for
//	                                     one time slice
//	<prefix>{<name>}:rate:<ms>           hash: the fleet's count of the name's writes per
//	                                     window of <ms> milliseconds (w:<window>) and each
//	                                     family's last report (i:<family>); expires three
//	                                     windows after the last report (a Family with HotRate)
//	<prefix>{<btag>}:births              hash: the birth records of the counters whose layout
//	                                     slot, rounded down to a multiple of 64, is the
//	                                     births key's slot minus 8192 (256 such keys): field
//	                                     <name>, value the layout's random token
//
// Every key of a counter, its birth record included, lives under the prefix: a process with
// another prefix finds no layout and would start the counter again from zero beside the old
// one, counting again the retries whose dedup records it cannot see. So every process of a
// counter sets the same Prefix. The default was "stripes:" before v0.2.0
// ([PreviousDefaultPrefix]); a counter created then stays there, and a process of this
// version with the default prefix refuses to create a counter whose layout it finds under
// the previous default ([ErrPreviousPrefix]), one HGET when it would create the layout. A
// host upgrading sets Options.Prefix to "stripes:" on every process (the CHANGELOG's note).
//
// A counter created with one stripe (a Family's cold name) has no document until its first
// Resize: its layout hash is a home record, ver "home", holding its one stripe's fields (g,
// v, maxt, end, sealed, d<r>), its birth token (born) and, unless they are the package's
// defaults, its dedup settings (dedup); its dedup sets are "<prefix>{<name>}:layout:e:...".
// It reads as version 1 with one generation. The first Resize writes the document into the
// same hash, keeping the stripe's fields there as generation 1 ("home" in the document),
// until that generation is sealed and dropped.
//
// Rolling upgrade: the version before home records refuses a home record, and a document
// naming a home generation, with ErrLayout (it finds no version, or no tag for the stripe),
// and writes nothing; its creation of a layout fails on a home record (cas.lua), and a home
// record is created only where no layout record exists (home.lua), so the first writer of
// a new counter's layout key decides its format and every process of either version agrees
// with it or refuses the counter: an event retried across versions counts once. Counters
// created by the version before keep their format. While both versions run, a new cold counter created by this version is refused by
// the old processes: upgrade them before relying on such counters from them. An old process
// that lost that race leaves its empty stripe key behind (no TTL, value 0).
//
// A stripe's value and its dedup sets share the stripe's hash tag, hence one slot: add.lua
// checks and increments atomically. Different stripes get different tags. When a generation
// is created on a cluster, its tags are chosen so that its stripes spread over the masters
// present then as evenly as possible (16 stripes on 3 masters: 6/5/5), each on a distinct
// slot; the tags are recorded in the layout and never move. On a standalone server the tags
// are the stripe numbers.
//
// # Memory and cost
//
// A dedup record is an integer in an intset-encoded set. Records are cut by time slice
// (DedupWindow/DedupSlices, from Event.Time) and expire together one window plus one slice
// after their slice ends. Within a slice and stripe they form a linear hash table: a
// bucket found half full (SetMembers/2, 256 by default) on a sampled addition splits the
// next bucket in order, so every set stays well below set-max-intset-entries and a lookup
// is one SADD whatever the number of records. This costs about 9-11 bytes of used_memory
// per remembered event (measured: 10.9 B over 20,000 events on 4 stripes), against about
// 130 bytes for one key per event. A Counter remembers, per stripe, the state of the dedup
// table of the latest slice it wrote (each add.lua reply carries it), so it can name the set
// an event's record falls in. A new event in an open stripe whose state it knows costs one
// small script (addfast.lua) of HMGET (three fields), SADD (the record and the set's marker,
// whose presence shows the set has not expired) and HINCRBY, plus an HSET of the latest event
// time when the event is the latest (at most once a millisecond); a retry, HMGET and SADD.
// The script compares the stored state with the Counter's view in the same atomic step, so a
// view made stale by a split elsewhere only sends the event to add.lua: the full path, which
// parses the state, chooses the set itself, and reads the server clock (TIME). It runs for
// the first event of a slice in a stripe, an event of a closed stripe, and after a stale
// view. About one addition in SetMembers/64 also checks its set's size, and one that finds
// it half full runs split.lua. Each step of a script costs about as much as a Redis command
// on the server, which is why the fast path is its own script with no arithmetic.
// BenchmarkAdd compares Add with INCR and with a script doing SET NX PX and INCRBY
// on a cluster; BenchmarkServerTimePerEvent does on dedicated servers, and
// BenchmarkServerTimeOnBusiestMaster on dedicated clusters at 1 and 16 stripes. A cold name
// of a Family (home record, one dedup set, birth record) took 507 bytes of used_memory with
// 3 events, against 571 for the same events through that script (BenchmarkColdNameMemory).
//
// # Collisions
//
// Two different IDs whose records are equal in the same stripe, generation and slice make
// the second a false duplicate: the counter undercounts by one. Records are 63 bits of the
// ID's xxhash64; with N events in one slice (DedupWindow/DedupSlices), the expected number
// of false duplicates is about N²/2^64: 5e-4 for 10^8 events per slice. A host trades memory
// for certainty with DedupSlices (k times more slices make the expected count k times
// smaller, at the cost of more, smaller sets) and DedupBits: 31 halves the memory (int32
// intsets) but raises the odds by 2^32 (N²/2^32 per slice: about 1 for 65,000 events).
//
// # ACL
//
// The client's user needs key access to the whole of Options.Prefix (scripts touch derived
// keys of their declared key's slot) and the scripting commands with every command the
// scripts and the Go code call (Redis checks those too): "~<prefix>* +evalsha +eval
// +hgetall +hget +hset +hsetnx +hmget +hincrby +hdel +hkeys +del +pexpire +pexpireat +sadd
// +srem +scard +smembers +time +cluster|slots". CLUSTER SLOTS places a new generation's
// stripes on a cluster's masters; every go-redis cluster client's user has it anyway. No
// SCRIPT LOAD: a script the server does not hold is sent again with EVAL and its source. No
// channel is used. [ACLRule] returns the rule for a Counter's Options, as ACL SETUSER
// arguments; the package's tests run once as a user holding only it (CELEBRITYTEST_ACL=stripes).
//
// # What is assumed of Redis
//
// Lua scripts with TIME (Redis 5+; effects replication). Dedup sets are reached from the
// stripe key inside add.lua, so they are not declared in KEYS; they share the stripe's slot,
// which Redis Cluster allows. The counter is as durable as its masters:
// with AOF appendfsync always and no failover data loss, the guarantee holds through
// restarts; a failover that loses acknowledged writes may lose counted events or their dedup
// records (a retry might then count again); lost keys are reported as [ErrVanished] as far
// as the next section says.
// Eviction: dedup sets carry TTLs, so a maxmemory-policy of volatile-* evicts them first
// and allkeys-* may evict any key; an evicted record lets a retry count again. Run the
// counter's servers with noeviction (or without maxmemory).
// Clocks: the window is checked on each master's clock; Event.Time and the Resize boundary
// come from the hosts' clocks, and events more than one window ahead are refused.
//
// # What is detected
//
// A counter never recreates state it had: a lost layout or stripe is reported as
// [ErrVanished] (a kind of [ErrLayout]) rather than counted again from zero. Precisely:
//
//   - A Counter that has read the layout once reports ErrVanished from Sum, Resize, Seal and
//     from every Add that needs the layout, if the layout record is gone, went back to an
//     older version, or was recreated (another random token); and from Sum and Add if a
//     stripe of a live generation is gone. An Add through its cached layout into a stripe
//     that survived still counts there.
//   - A fresh Counter (a new process) detects a lost layout record through the birth record,
//     written once the layout exists (by its creator, or by the next process that reads a
//     layout whose birth record is missing). The births key lives in the layout's slot
//     (rounded down to a multiple of 64) plus 8192: on a cluster whose masters own even, contiguous slot ranges (the usual
//     allocation), that is another master, so the restart without persistence, the
//     failover or the flush of the layout's master is detected. It is not detected when the
//     birth record is lost too: a FLUSHALL of a standalone server or of every master, or
//     both masters losing their data. A fresh Counter detects a lost stripe of a live
//     generation through the layout that names it.
//   - A [Family] detects as a Counter does for the names it holds in memory. A name it
//     dropped (MaxNames, IdleAfter) keeps nothing in memory, so its next use detects as a
//     fresh Counter does: when the birth record was lost too, the name starts again from
//     zero.
//   - A stripe or layout restored to an older value (a stale backup) with the same keys
//     present is not detected unless this process saw a later layout version.
package stripes
