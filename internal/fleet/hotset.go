package fleet

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/internal/script"
	"github.com/celebrity-go/celebrity/internal/slot"
)

var (
	//go:embed report.lua
	reportLua string
	//go:embed poll.lua
	pollLua string
	//go:embed apply.lua
	applyLua string
	//go:embed learn.lua
	learnLua string

	reportScript = script.New(reportLua)
	pollScript   = script.New(pollLua)
	applyScript  = script.New(applyLua)
	learnScript  = script.New(learnLua)
)

// Keyset names the Redis keys and channels of the fleet loop.
type Keyset struct {
	Meta, Lease, Members, Demoted, Size string
	Channel                             string
}

func (l *Loop) keys() Keyset { return Keys(l.o.Prefix) }

// Keys names the hot set's keys under prefix (checked: no braces); they share one slot.
func Keys(p string) Keyset {
	tag := slot.Tagged(p, p+"hot")
	return Keyset{Meta: tag + "meta", Lease: tag + "leader", Members: tag + "members",
		Demoted: tag + "demoted", Size: tag + "size", Channel: p + "hot"}
}

// summaryKey is shard's part of the summary of one interval; every shard is its own slot.
func (l *Loop) summaryKey(shard int, interval int64) string {
	return l.sumTags[shard] + ":" + strconv.FormatInt(interval, 10)
}

// SummaryTags returns the keys (less their ":<interval>") of the summary's shards under
// prefix. Shard i's hash tag is prefix+"sum<i>.<j>" with the first j that puts it within
// SumSlotWidth(shards) slots of (2i+1)·Count/(2·shards): the shards spread evenly over the
// slot space, so that 3 or more of them land on every master of a 3-master cluster with even
// slot ranges (not on one by chance of their names' hashes), and every instance finds the
// same names.
func SummaryTags(prefix string, shards int) []string {
	tags := make([]string, shards)
	width := SumSlotWidth(shards)
	for i := range tags {
		center := (2*i + 1) * slot.Count / (2 * shards)
		base := prefix + "sum" + strconv.Itoa(i) + "."
		for j := 0; ; j++ {
			tag := base + strconv.Itoa(j)
			if d := int(slot.Of("{"+tag+"}")) - center; d > -width && d < width {
				tags[i] = slot.Tagged(prefix, tag)
				break
			}
		}
	}
	return tags
}

// SumSlotWidth is how far from its target slot a summary shard's slot may be: a sixteenth of
// the space between two shards' targets (a few tries per shard to find), at least 8 slots (at
// most about 1,000 tries per shard with 1,024 shards).
func SumSlotWidth(shards int) int { return max(slot.Count/(16*shards), 8) }

// report adds this instance's heaviest Redis-level reads to the summary of the current
// interval, on the shard its ID hashes to: once per interval at this instance's phase of the
// interval (the regular report), and at most once more, as soon as a key that is not hot and
// not yet reported in this interval reaches EarlyReportRate (the early report, with only such
// keys). Each key counts at most once per instance and interval: the regular report leaves
// out what the early one sent, and each report is idempotent by its own ID.
func (l *Loop) report(ctx context.Context) error {
	f := &l.fleet
	iv := int64(l.o.ReportInterval)
	now := l.o.Clock().UnixNano()
	slot := now / iv
	if f.sentSlot != slot {
		f.sent, f.sentSlot = map[string]bool{}, slot
	}
	// An instance whose ticks came late and passed its moment of the last interval reports
	// at once.
	missed := f.lastSlot != 0 && f.lastSlot < slot-1
	regular := f.lastSlot != slot && (time.Duration(now%iv) >= f.phase || missed)
	early := l.o.EarlyReportRate > 0 && f.earlySlot != slot && f.lastSlot != slot
	if !regular && !early {
		return nil
	}
	top, err := l.det.Top(l.o.ReportTop)
	if err != nil {
		return err
	}
	top = settled(top, time.Duration(now-f.born), l.o.ReportInterval/2)
	id := l.fleetID
	var pairs, slow []any
	weight := 0
	if regular {
		f.lastSlot = slot
		k := l.sampleEvery()
		if l.onTurn(slot, k) {
			weight = int(k)
		}
		pairs = l.regularPairs(top, slot, time.Duration(now%iv), k, weight > 0)
		f.dropCold()
		slow = l.slowLane(top, slot)
	} else if pairs = l.earlyPairs(top); len(pairs) > 0 {
		f.earlySlot = slot
		id += ":early"
	}
	if len(pairs) == 0 && len(slow) == 0 {
		return nil
	}
	return l.sendReport(ctx, id, slot, weight, pairs, slow)
}

// sampleEvery is K, how many intervals apart this instance makes its regular report (see
// Options.ReportsPerInterval): ⌈N/ReportsPerInterval⌉ for the fleet's size N as last
// estimated; 1 with the sampling off, and while no size is known that a leader stated
// within sizeLife intervals (before the first estimate, or with a leader of a release that
// reads no sampled rates).
func (l *Loop) sampleEvery() int64 {
	per := int64(l.o.ReportsPerInterval)
	f := &l.fleet
	if per < 0 || l.o.Clock().UnixNano()-f.sizeAt.Load() > int64(sizeLife*l.o.ReportInterval) {
		return 1 // no leader that estimates the fleet's size (one of a release without it)
	}
	return min(max(1, (f.fleetN.Load()+per-1)/per), maxSampleEvery)
}

// maxSampleEvery bounds K: a fleet of more than 1024×ReportsPerInterval instances reports
// more than ReportsPerInterval times per interval.
const maxSampleEvery = 1024

// onTurn reports whether interval slot is this instance's turn to report every key of its
// regular report when instances take turns every k intervals (by their ID).
func (l *Loop) onTurn(slot, k int64) bool {
	return (slot+int64(xxhash.Sum64String(l.o.InstanceID)%uint64(k)))%k == 0
}

// sendReport adds the key/rate pairs (those that may nudge the leader first) and the slow
// lane's pairs to interval slot's summary, on the shard this instance's ID hashes to, as
// the report id (idempotent: a retried report adds nothing), with the instances it stands
// for (weight: K on its turn, 0 otherwise) towards the leader's estimate of the fleet.
func (l *Loop) sendReport(ctx context.Context, id string, slot int64, weight int, pairs, slow []any) error {
	f := &l.fleet
	for i := 0; i < len(pairs); i += 2 {
		f.sent[pairs[i].(string)] = true
	}
	pairs, nudging := nudgingFirst(pairs, f.isHot)
	args := append([]any{id, (time.Duration(l.o.summaryIntervals()) * l.o.ReportInterval).Milliseconds() + 1,
		fmtRate(l.o.PromoteRate / float64(l.o.SummaryShards)), l.keys().Channel, "n" + strconv.FormatInt(slot, 10), nudging, len(slow) / 2, weight}, pairs...)
	args = append(args, slow...)
	shard := int(xxhash.Sum64String(l.o.InstanceID) % uint64(l.o.SummaryShards))
	f.loopCommands.Add(1)
	f.reports.Add(1)
	return reportScript.Run(ctx, l.client, []string{l.summaryKey(shard, slot)}, args...).Err()
}

// settled returns top with every rate taken over the local detector's whole window while
// the instance is younger than that window. A young detector divides its first reads by the
// little history it has (one sub-window at least), so a fleet that starts at once (a deploy)
// would report a key each instance read a few times as many times hotter than it is, and
// promote it. A young instance understates instead, for its first half interval.
func settled(top []hotkeys.KeyLoad, age, window time.Duration) []hotkeys.KeyLoad {
	if age >= window {
		return top
	}
	for i := range top {
		top[i].Rate = top[i].Count / window.Seconds()
	}
	return top
}

// nudgingFirst orders key/rate pairs with the keys that are not hot first, and returns how
// many those are: only they may nudge the leader (a hot key needs no promotion).
func nudgingFirst(pairs []any, hot func(string) bool) ([]any, int) {
	out := make([]any, 0, len(pairs))
	for i := 0; i < len(pairs); i += 2 {
		if !hot(pairs[i].(string)) {
			out = append(out, pairs[i], pairs[i+1])
		}
	}
	n := len(out) / 2
	for i := 0; i < len(pairs); i += 2 {
		if hot(pairs[i].(string)) {
			out = append(out, pairs[i], pairs[i+1])
		}
	}
	return out, n
}

// regularPairs returns the key/rate pairs of the regular report of interval slot, made
// elapsed into it, when instances take turns every k intervals and turn says whether slot
// is this instance's: every key of top at or above ReportMinRate not sent yet in the
// interval; with k > 1, on its turn at k times its rate, marked sampled (the leader scales
// the sum of those to the fleet, see fleetRates), otherwise only the keys it reads at
// PromoteRate/k or faster, at their rate;
// with k = 1 and HotReportEvery, a hot key only on this instance's turn, its rate scaled by
// HotReportEvery. A hot key's rate counts only its reads inside the interval (hotRate), not
// the detector's look-back into the previous one: a key that faded late in one interval
// counts nothing in the next, and its hold starts there.
func (l *Loop) regularPairs(top []hotkeys.KeyLoad, slot int64, elapsed time.Duration, k int64, turn bool) []any {
	f := &l.fleet
	every := int64(l.o.HotReportEvery)
	hotTurn := l.onTurn(slot, every)
	var pairs []any
	for _, kl := range top {
		if kl.Rate <= 0 || f.sent[kl.Key] {
			continue
		}
		hot := f.isHot(kl.Key)
		rate := kl.Rate
		if hot {
			rate = l.hotRate(kl.Key, slot, elapsed)
		}
		if rate <= 0 || rate < l.o.ReportMinRate {
			continue
		}
		switch {
		case k > 1 && rate >= l.o.PromoteRate/float64(k):
			pairs = append(pairs, kl.Key, fmtRate(rate))
		case k > 1 && turn:
			pairs = append(pairs, kl.Key, "t"+fmtRate(rate*float64(k)))
		case k > 1:
		case every == 1 || !hot:
			pairs = append(pairs, kl.Key, fmtRate(rate))
		case hotTurn:
			pairs = append(pairs, kl.Key, fmtRate(rate*float64(every)))
		}
	}
	return pairs
}

// hotRate is a hot key's rate of reads inside interval slot, elapsed into it: its reads since
// the interval began over the time elapsed, but over no less than half an interval (the
// detector's window), so that a report early in the interval weighs a read no more than the
// detector would. An early report understates a live key's rate then; it never counts a
// faded key's reads from before the interval, so it cannot keep a faded key from its hold.
func (l *Loop) hotRate(key string, slot int64, elapsed time.Duration) float64 {
	span := max(elapsed, l.o.ReportInterval/2)
	return float64(l.fleet.hotReadsIn(key, slot)) / span.Seconds()
}

// earlyPairs returns the key/rate pairs of an early report: the keys of top not hot and not
// sent yet in the interval that reach EarlyReportRate.
func (l *Loop) earlyPairs(top []hotkeys.KeyLoad) []any {
	f := &l.fleet
	var pairs []any
	for _, k := range top {
		if k.Rate >= l.o.EarlyReportRate && !f.sent[k.Key] && !f.isHot(k.Key) {
			pairs = append(pairs, k.Key, fmtRate(k.Rate))
		}
	}
	return pairs
}

// poll reads the hot set's version (learning the set when it changed) and takes or renews the
// leader lease. quiet is how long the poll shows the channel need not be polled again: the
// remaining time of another instance's live lease when the version was the one applied here
// (a leader whose heartbeat is late, not a change missed); zero otherwise.
func (l *Loop) poll(ctx context.Context) (quiet time.Duration, err error) {
	ks := l.keys()
	lease := (3 * l.o.ReportInterval).Milliseconds() + 1
	l.fleet.loopCommands.Add(1)
	l.fleet.polls.Add(1)
	size := int64(0)
	if l.fleet.estimated.Load() {
		size = l.fleet.fleetN.Load()
	}
	res, err := pollScript.Run(ctx, l.client, []string{ks.Meta, ks.Lease, ks.Size}, l.fleetID, lease, size,
		(sizeLife * l.o.ReportInterval).Milliseconds()).Slice()
	if err != nil {
		return 0, err
	}
	if len(res) != 8 {
		return 0, fmt.Errorf("celebrity: poll: unexpected reply %v", res)
	}
	version, _ := res[1].(int64)
	lead, _ := res[2].(int64)
	epoch, _ := res[3].(int64)
	left, _ := res[4].(int64)
	vid, _ := res[5].(string)
	other, _ := res[6].(string)
	l.sawLeader(other, time.Duration(lease)*time.Millisecond)
	l.fleet.leader.Store(lead == 1)
	l.fleet.epoch.Store(epoch)
	if n, _ := res[7].(int64); lead != 1 || !l.fleet.estimated.Load() {
		l.fleet.setSize(n, l.o.Clock().UnixNano())
	}
	l.fleet.firstPoll.CompareAndSwap(0, l.o.Clock().UnixNano())
	if cur, curVid := l.fleet.applied(); uint64(version) != cur || vid != curVid {
		return 0, l.learn(ctx)
	}
	if lead == 1 {
		return 0, nil
	}
	return time.Duration(left) * time.Millisecond, nil
}

// sawLeader notes the leader's ID a poll found (other; "" when this instance leads): one
// with this instance's InstanceID and another nonce is another process given the same
// InstanceID, or an earlier run of this one whose lease has not expired yet. Seen again
// after more than the lease's life, it renewed its lease, so it is live: the clash is
// counted (Stats.DuplicateInstanceIDs, once per twin) and logged.
func (l *Loop) sawLeader(other string, lease time.Duration) {
	id, _, _ := strings.Cut(other, "/")
	if other == "" || other == l.fleetID || id != l.o.InstanceID {
		return
	}
	f := &l.fleet
	now := time.Now().UnixNano()
	f.twinMu.Lock()
	defer f.twinMu.Unlock()
	first, seen := f.twins[other]
	if !seen {
		if f.twins == nil {
			f.twins = map[string]int64{}
		}
		f.twins[other] = now
		return
	}
	if first < 0 || time.Duration(now-first) <= lease {
		return
	}
	f.twins[other] = -1
	if l.o.Logger != nil {
		l.o.Logger.Warn("celebrity: another live instance uses this InstanceID; give every instance its own",
			"instance_id", l.o.InstanceID)
	}
	// Counted after the warning: a reader that sees the count also finds the warning.
	f.duplicates.Add(1)
}

// retryPromotions warms the copies of hot keys whose promotion failed on this instance
// (replicas does not count them hot); it sends nothing when every promotion succeeded.
func (l *Loop) retryPromotions(ctx context.Context) {
	if !l.cluster {
		return
	}
	l.fleet.learnMu.Lock()
	defer l.fleet.learnMu.Unlock()
	for key := range *l.fleet.hot.Load() {
		if !l.rep.IsHot(key) {
			if err := l.rep.Promote(ctx, key); err != nil {
				l.loopError("promote copies", err)
			}
		}
	}
}

// evaluate is the leader's step: sum the fleet's reports of one interval and promote or
// demote keys through apply.lua, fenced by the leader's lease and epoch. A partial evaluation
// (of the interval under way) only promotes.
func (l *Loop) evaluate(ctx context.Context, slot int64, partial bool) error {
	f := &l.fleet
	f.evaluations.Add(1)
	if !partial {
		f.fullEvaluations.Add(1)
	}
	rates, err := l.fleetRates(ctx, slot, partial)
	if err != nil {
		return err
	}
	// The members as this instance applies them: it learns every change it applies at once,
	// and the others' (manual) changes by pub/sub or its next poll; a decision made on a
	// set it has not learned yet changes nothing, as apply.lua ignores an op that does not
	// apply.
	members := *f.hot.Load()
	var args []any
	if partial {
		args = l.promotions(ctx, rates, members)
	} else {
		args = l.decide(ctx, slot, rates, members)
	}
	if len(args) == 0 {
		return nil
	}
	return l.apply(ctx, l.fleetID, f.epoch.Load(), args)
}

// fleetRates reads the summary of interval slot in one pipeline and returns each key's
// fleet-wide rate: the sum of the regular reports (their sampled rates scaled to the fleet,
// see sampleScale, in a full evaluation) plus the slow lane's; a full evaluation also updates
// the estimate of the fleet's size. A leader that just
// took over (or skipped an interval) reads back the slow reports of the slow lane's window
// once, in the same pipeline.
func (l *Loop) fleetRates(ctx context.Context, slot int64, partial bool) (map[string]float64, error) {
	pipe := l.client.Pipeline()
	sums := l.readSummary(ctx, pipe, slot)
	var back []int64
	var backSums [][]*redis.MapStringStringCmd
	if l.slow != nil && !partial {
		back = l.fleet.missingSlow(slot, l.o.SlowReportEvery)
		for _, s := range back {
			backSums = append(backSums, l.readSummary(ctx, pipe, s))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var instances int64
	rates, sampled, slow := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, s := range sums {
		instances += ParseSummary(s.Val(), rates, sampled, slow)
	}
	if !partial {
		l.fleet.estimateFleet(instances, l.o.Clock().UnixNano())
	}
	scale := l.fleet.sampleScale(instances, partial)
	for k, r := range sampled {
		rates[k] += r * scale
	}
	if l.slow != nil {
		l.addSlow(slot, partial, rates, slow, back, backSums)
	}
	return rates, nil
}

// readSummary queues the reads of every shard of interval slot's summary on pipe.
func (l *Loop) readSummary(ctx context.Context, pipe redis.Pipeliner, slot int64) []*redis.MapStringStringCmd {
	cmds := make([]*redis.MapStringStringCmd, l.o.SummaryShards)
	for i := range cmds {
		cmds[i] = pipe.HGetAll(ctx, l.summaryKey(i, slot))
	}
	l.fleet.loopCommands.Add(uint64(len(cmds)))
	return cmds
}

// addSlow keeps the slow sums read back (back, backSums) and, after a full interval, this
// interval's (slow), and adds the slow lane's window ending at slot to rates.
func (l *Loop) addSlow(slot int64, partial bool, rates, slow map[string]float64, back []int64, backSums [][]*redis.MapStringStringCmd) {
	f := &l.fleet
	for i, s := range back {
		old := map[string]float64{}
		for _, cmd := range backSums[i] {
			ParseSummary(cmd.Val(), map[string]float64{}, map[string]float64{}, old)
		}
		f.keepSlow(s, l.o.SlowReportEvery, old)
	}
	for k, r := range f.slowWindow(slot, l.o.SlowReportEvery, slow) {
		rates[k] += r
	}
	if !partial {
		f.keepSlow(slot, l.o.SlowReportEvery, slow)
	}
}

// decide turns the fleet's rates of one interval (slot) into apply.lua's triples: promote the
// fastest keys at or above PromoteRate; demote a fleet-decided member once the intervals it
// spent under DemoteRate without a break add up to Hold. Counting intervals rather than
// evaluation times makes the hold independent of when the leader happens to run.
func (l *Loop) decide(ctx context.Context, slot int64, rates map[string]float64, members map[string]Member) []any {
	f := &l.fleet
	if f.lowSince == nil {
		f.lowSince = map[string]int64{}
	}
	args := l.promotions(ctx, rates, members)
	for k, m := range members {
		if m.Manual || rates[k] >= l.o.DemoteRate {
			delete(f.lowSince, k)
			continue
		}
		first, ok := f.lowSince[k]
		if !ok {
			f.lowSince[k], first = slot, slot
		}
		if time.Duration(slot-first+1)*l.o.ReportInterval >= l.o.Hold {
			args = append(args, "-", k, fmtRate(rates[k]))
			delete(f.lowSince, k)
			f.lastDemo.Store(&demoteDecision{key: k, slot: slot})
		}
	}
	for k := range f.lowSince {
		if _, ok := members[k]; !ok {
			delete(f.lowSince, k)
		}
	}
	return args
}

// promotions returns apply.lua's triples promoting the keys not yet members whose rate is at
// or above PromoteRate, or at or above PromoteShare of their master's load (hotByShare),
// fastest first.
func (l *Loop) promotions(ctx context.Context, rates map[string]float64, members map[string]Member) []any {
	var up []string
	for k, r := range rates {
		if _, ok := members[k]; !ok && (r >= l.o.PromoteRate || l.hotByShare(ctx, k, r)) {
			up = append(up, k)
		}
	}
	sort.Slice(up, func(i, j int) bool { return rates[up[i]] > rates[up[j]] })
	var args []any
	for _, k := range up {
		args = append(args, "+", k, fmtRate(rates[k]))
	}
	return args
}

func fmtRate(r float64) string { return strconv.FormatFloat(r, 'f', 3, 64) }

// apply runs apply.lua, which changes the hot set and announces the change on the hot-set
// channel in the same step, and applies the change here at once (from the announcement, or
// by reading the set when this instance had not applied the version before it).
func (l *Loop) apply(ctx context.Context, id string, epoch int64, triples []any) error {
	ks := l.keys()
	dttl := max(l.o.Hold, time.Minute).Milliseconds()
	args := append([]any{id, strconv.FormatInt(epoch, 10), l.o.Clock().UnixMilli(), l.o.MaxHot, dttl, ks.Channel}, triples...)
	l.fleet.loopCommands.Add(1)
	res, err := applyScript.Run(ctx, l.client, []string{ks.Meta, ks.Lease, ks.Members, ks.Demoted}, args...).Slice()
	if err != nil {
		return err
	}
	if len(res) != 4 {
		return fmt.Errorf("celebrity: apply: unexpected reply %v", res)
	}
	if res[0] == "fenced" {
		l.fleet.fenced.Add(1)
		l.fleet.leader.Store(false)
		return nil
	}
	v, _ := res[1].(int64)
	if n, _ := res[2].(int64); n > 0 {
		l.fleet.published.Store(l.o.Clock().UnixNano())
		if msg, _ := res[3].(string); l.applyAnnouncement(ctx, msg) {
			return nil
		}
		return l.learn(ctx)
	}
	if uint64(v) == l.fleet.version.Load() {
		return nil
	}
	return l.learn(ctx)
}

// announcement is a change of the hot set as apply.lua announces it: the version it makes,
// the vids of the version it changes and of the one it makes ("" from a release before
// vids), and the records of the keys it changed.
type announcement struct {
	version   uint64
	prev, vid string
	changes   []announced
}

// announced is one key changed by an announcement: its new member record, or its removal
// with the rate and moment that decided it.
type announced struct {
	key     string
	removed bool
	m       Member
}

// parseAnnouncement parses "d<version> <previous vid> <vid>\n" (or "d<version>\n", from a
// release before vids) followed by "<kind>|<rate>|<ms>|<len>:<key>" records (apply.lua). ok
// is false for anything else (a version alone, a nudge, garbage).
func parseAnnouncement(s string) (a announcement, ok bool) {
	rest, ok := strings.CutPrefix(s, "d")
	if !ok {
		return a, false
	}
	head, rest, ok := strings.Cut(rest, "\n")
	if !ok || !a.parseHead(head) {
		return a, false
	}
	for rest != "" {
		var kind, rate, ms, n string
		var ok1, ok2, ok3, ok4 bool
		kind, rest, ok1 = strings.Cut(rest, "|")
		rate, rest, ok2 = strings.Cut(rest, "|")
		ms, rest, ok3 = strings.Cut(rest, "|")
		n, rest, ok4 = strings.Cut(rest, ":")
		if !ok1 || !ok2 || !ok3 || !ok4 || (kind != "a" && kind != "m" && kind != "-") {
			return a, false
		}
		l, err := strconv.Atoi(n)
		if err != nil || l < 1 || l > len(rest) {
			return a, false
		}
		r, err1 := strconv.ParseFloat(rate, 64)
		t, err2 := strconv.ParseInt(ms, 10, 64)
		if err1 != nil || err2 != nil {
			return a, false
		}
		a.changes = append(a.changes, announced{key: rest[:l], removed: kind == "-",
			m: Member{Manual: kind == "m", Rate: r, Since: time.UnixMilli(t)}})
		rest = rest[l:]
	}
	return a, len(a.changes) > 0
}

// parseHead parses an announcement's first line without its "d": "<version> <previous
// vid> <vid>", or "<version>" from a release before vids.
func (a *announcement) parseHead(head string) bool {
	num, vids, withVids := strings.Cut(head, " ")
	if withVids {
		var ok bool
		if a.prev, a.vid, ok = strings.Cut(vids, " "); !ok || a.prev == "" || a.vid == "" {
			return false
		}
	}
	v, err := strconv.ParseUint(num, 10, 64)
	a.version = v
	return err == nil && v > 0
}

// applyAnnouncement applies an announced change of the hot set to this instance without
// reading the set, when this instance applied the version just before it. It reports whether
// this instance now applies the announced version or a newer one; false means the message
// was no announcement, or versions were missed in between (the caller reads the set).
func (l *Loop) applyAnnouncement(ctx context.Context, msg string) bool {
	a, ok := parseAnnouncement(msg)
	if !ok {
		return false
	}
	f := &l.fleet
	f.learnMu.Lock()
	defer f.learnMu.Unlock()
	cur, curVid := f.applied()
	if a.version == cur && (a.vid == "" || a.vid == curVid) || a.version < cur && a.vid == "" {
		return true // this change, applied (or an older one, from a release before vids)
	}
	// An older number with a vid is a late message or a master that went back past the
	// version applied here (it lost changes): reading the set tells them apart.
	if a.version != cur+1 || a.vid != "" && a.prev != curVid {
		return false // versions missed, or another change under the number applied here
	}
	old := *f.hot.Load()
	next := make(map[string]Member, len(old)+len(a.changes))
	for k, m := range old {
		next[k] = m
	}
	demoted := map[string]string{}
	for _, ch := range a.changes {
		if ch.removed {
			delete(next, ch.key)
			demoted[ch.key] = fmtRate(ch.m.Rate) + "|" + strconv.FormatInt(ch.m.Since.UnixMilli(), 10)
		} else {
			next[ch.key] = ch.m
		}
	}
	vid := a.vid
	if vid == "" {
		vid = "-"
	}
	l.install(ctx, a.version, vid, old, next, demoted)
	return true
}

// pairs turns a flat field/value reply into a map.
func pairs(v any) map[string]string {
	l, _ := v.([]any)
	out := make(map[string]string, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		k, _ := l[i].(string)
		out[k], _ = l[i+1].(string)
	}
	return out
}

func ParseMembers(m map[string]string) map[string]Member {
	out := make(map[string]Member, len(m))
	for k, v := range m {
		parts := strings.SplitN(v, "|", 3)
		var mb Member
		if len(parts) == 3 {
			mb.Manual = parts[0] == "m"
			mb.Rate, _ = strconv.ParseFloat(parts[1], 64)
			if ms, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
				mb.Since = time.UnixMilli(ms)
			}
		}
		out[k] = mb
	}
	return out
}

// learn reads the hot set and applies its changes on this instance: a promoted key gets its
// copies warmed (replicas.Promote) before reads use them, and refresh-ahead; a demoted key
// reads the logical key again.
func (l *Loop) learn(ctx context.Context) error {
	f := &l.fleet
	f.learnMu.Lock()
	defer f.learnMu.Unlock()
	ks := l.keys()
	f.loopCommands.Add(1)
	res, err := learnScript.Run(ctx, l.client, []string{ks.Meta, ks.Members, ks.Demoted}).Slice()
	if err != nil {
		return err
	}
	if len(res) != 5 || res[0] != "ok" {
		return fmt.Errorf("celebrity: learn: unexpected reply %v", res)
	}
	v, _ := res[1].(int64)
	vid, _ := res[4].(string)
	version := uint64(v)
	if cur, curVid := f.applied(); version == cur && vid == curVid {
		return nil
	}
	l.install(ctx, version, vid, *f.hot.Load(), ParseMembers(pairs(res[2])), pairs(res[3]))
	return nil
}

// install makes next (the members at version) the hot set this instance applies, coming from
// old: promoted keys get their copies warmed first, demoted keys read the logical key again.
// The caller holds learnMu.
func (l *Loop) install(ctx context.Context, version uint64, vid string, old, next map[string]Member, demoted map[string]string) {
	f := &l.fleet
	ch := planLearn(old, next, demoted)
	for _, k := range ch.promoted {
		l.promoteLocal(ctx, k, next[k], version)
	}
	for _, d := range ch.demoted {
		l.demoteLocal(ctx, d.key, d.rate, d.decided, version)
	}
	// The version goes in before the members, so that a caller that saw the new members in
	// Hot reads their version in Stats (the promotions and demotions are counted above).
	f.vid.Store(&vid)
	f.version.Store(version)
	f.hot.Store(&next)
}

// learnPlan is what a new version of the hot set changes on an instance that applied old.
type learnPlan struct {
	promoted []string // keys of next not in old
	demoted  []demotion
}

// demotion is one key that left the hot set, with the record of the decision (zero values
// when the demotions hash has none).
type demotion struct {
	key     string
	rate    float64
	decided time.Time
}

// planLearn compares the members applied (old) with the members read (next), given the
// demotions hash ("<rate>|<ms>" per key). It is pure.
func planLearn(old, next map[string]Member, demoted map[string]string) learnPlan {
	var p learnPlan
	for k := range next {
		if _, ok := old[k]; !ok {
			p.promoted = append(p.promoted, k)
		}
	}
	for k := range old {
		if _, ok := next[k]; ok {
			continue
		}
		d := demotion{key: k}
		if s, ms, ok := strings.Cut(demoted[k], "|"); ok {
			d.rate, _ = strconv.ParseFloat(s, 64)
			if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
				d.decided = time.UnixMilli(n)
			}
		}
		p.demoted = append(p.demoted, d)
	}
	return p
}

func (l *Loop) promoteLocal(ctx context.Context, key string, m Member, version uint64) {
	if l.cluster {
		if err := l.rep.Promote(ctx, key); err != nil {
			l.loopError("promote copies", err) // reads fall back from cold copies and refill them
		}
	} else {
		l.fleet.warnAlone.Do(func() {
			if l.o.Logger != nil {
				l.o.Logger.Info("celebrity: standalone Redis: hot keys are not replicated (copies on one server spread nothing); detection, the hot set and refresh-ahead still run")
			}
		})
	}
	l.fleet.promotions.Add(1)
	l.emit(Event{Kind: Promoted, Key: key, Rate: m.Rate, Manual: m.Manual, HotVersion: version, Decided: m.Since, At: l.o.Clock()})
}

func (l *Loop) demoteLocal(ctx context.Context, key string, rate float64, decided time.Time, version uint64) {
	if l.cluster {
		_ = l.rep.Demote(ctx, key)
	}
	if l.o.OnDemote != nil {
		l.o.OnDemote(key)
	}
	l.fleet.demotions.Add(1)
	l.emit(Event{Kind: Demoted, Key: key, Rate: rate, HotVersion: version, Decided: decided, At: l.o.Clock()})
}

func (l *Loop) emit(ev Event) {
	if l.o.OnEvent != nil {
		l.o.OnEvent(ev)
	}
}
