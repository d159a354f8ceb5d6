package fleet

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// fleet is the state of the detect → promote → demote loop on one instance.
type fleet struct {
	hot      atomic.Pointer[map[string]Member] // the hot set as this instance applies it
	version  atomic.Uint64                     // the hot set version applied
	vid      atomic.Pointer[string]            // which version of that number (apply.lua); nil: "-"
	hotReads sync.Map                          // key -> *hotCount: a hot key's reads per interval
	learnMu  sync.Mutex

	leader     atomic.Bool
	epoch      atomic.Int64
	lowSince   map[string]int64               // leader only: the first interval of a member's run under DemoteRate
	lastSlot   int64                          // the last interval this instance made its regular report for
	earlySlot  int64                          // the last interval this instance made an early report for
	sent       map[string]bool                // the keys this instance reported for the interval lastSlot/earlySlot
	sentSlot   int64                          // the interval sent describes
	phase      time.Duration                  // when in each interval this instance reports, unless early
	born       int64                          // when the local detector began counting, Unix nanoseconds
	slowReads  map[string]float64             // the slow lane: lukewarm keys' reads since the last slow report
	slowN      int                            // the intervals slowReads covers
	slowRing   map[int64]map[string]float64   // leader only: each interval's slow-lane sums
	lastEval   int64                          // the last interval this instance evaluated as leader
	estimate   float64                        // leader only: the fleet's size, smoothed over full evaluations
	fleetN     atomic.Int64                   // the fleet's size as this instance knows it (estimate, or the leader's by poll)
	sizeAt     atomic.Int64                   // when a leader last stated fleetN, Unix nanoseconds
	estimated  atomic.Bool                    // estimate was set: a leader's polls keep its own
	sizeSent   int64                          // leader only: the fleet's size it last published
	sizeSentAt int64                          // leader only: when, Unix nanoseconds
	lastDemo   atomic.Pointer[demoteDecision] // leader only: the last demotion this instance decided
	nodes      nodeLoad                       // leader only: the masters' commands per second (PromoteShare)
	ticks      int64                          // the report loop's ticks
	quietTill  int64                          // the first tick at which a silent channel makes this instance poll again
	warnAlone  sync.Once

	heard     atomic.Int64  // when this instance last heard the hot-set channel, Unix nanoseconds
	nudge     chan struct{} // a report crossed a shard's share of PromoteRate (leader only)
	nudgeSlot atomic.Int64  // the interval of the last nudge
	watch     int64         // leader only: the interval evaluated every quarter after a nudge
	quarter   int64         // leader only: the quarter interval (Unix ns / (ReportInterval/subTicks)) of the last partial evaluation
	pending   int64         // leader only: the interval of a nudge left to the next quarter's evaluation
	published atomic.Int64  // when this instance last published on it, Unix nanoseconds
	firstPoll atomic.Int64  // when this instance first polled successfully, Unix nanoseconds

	cancel context.CancelFunc
	wg     sync.WaitGroup
	ps     *redis.PubSub

	reports, evaluations, promotions, demotions atomic.Uint64
	loopCommands, loopErrors, fenced, polls     atomic.Uint64
	heartbeats, fullEvaluations, duplicates     atomic.Uint64

	twinMu sync.Mutex
	twins  map[string]int64 // leader IDs with this InstanceID and another nonce: first seen (Unix ns), -1 once counted
}

// estimateFleet updates the leader's estimate of the fleet's size with the instances the
// regular reports of one interval stand for (each counts K on its turn, once in K intervals,
// so the sum is the reporting fleet on average): an average over about 4 intervals, which
// the leader writes into the hot set's meta with its next poll for every instance to read.
func (f *fleet) estimateFleet(instances, now int64) {
	if instances <= 0 {
		return
	}
	if f.estimate == 0 {
		f.estimate = float64(instances)
	} else {
		f.estimate += (float64(instances) - f.estimate) / 4
	}
	f.estimated.Store(true)
	f.setSize(int64(math.Round(f.estimate)), now)
}

// sampleScale is what the leader multiplies the sampled rates of an evaluation by: the
// fleet's size over the instances the reports read stand for. The turns split the fleet
// unevenly (by the hash of each ID), so one interval's turns may hold twice the share of
// another's; scaling by the share each interval actually had keeps the estimate level. A
// partial evaluation only scales down (its first few reports must not stand for the fleet).
func (f *fleet) sampleScale(instances int64, partial bool) float64 {
	if instances <= 0 || f.estimate <= 0 {
		return 1
	}
	scale := f.estimate / float64(instances)
	if partial {
		return min(scale, 1)
	}
	return scale
}

// demoteDecision is a demotion the leader decided: the key and the interval whose evaluation
// decided it.
type demoteDecision struct {
	key  string
	slot int64
}

// member is one key of the hot set.
type Member struct {
	Manual bool
	Rate   float64
	Since  time.Time
}

// hotCount counts a hot key's reads in the current and the previous interval (by the
// interval's parity): a hot key's report counts only the reads inside the interval it reports.
type hotCount struct {
	slot [2]atomic.Int64
	n    [2]atomic.Int64
}

// countHot counts one read of the hot key key in interval slot. A read racing with the first
// read of a new interval may be lost; a count is an estimate, never an overstatement.
func (f *fleet) countHot(key string, slot int64) {
	v, ok := f.hotReads.Load(key)
	if !ok {
		v, _ = f.hotReads.LoadOrStore(key, new(hotCount))
	}
	h := v.(*hotCount)
	i := slot & 1
	if s := h.slot[i].Load(); s != slot && h.slot[i].CompareAndSwap(s, slot) {
		h.n[i].Store(0)
	}
	h.n[i].Add(1)
}

// hotReadsIn returns how many reads of key countHot counted in interval slot.
func (f *fleet) hotReadsIn(key string, slot int64) int64 {
	v, ok := f.hotReads.Load(key)
	if !ok {
		return 0
	}
	h := v.(*hotCount)
	i := slot & 1
	if h.slot[i].Load() != slot {
		return 0
	}
	return h.n[i].Load()
}

// dropCold forgets the counts of keys that left the hot set.
func (f *fleet) dropCold() {
	f.hotReads.Range(func(k, _ any) bool {
		if !f.isHot(k.(string)) {
			f.hotReads.Delete(k)
		}
		return true
	})
}

func (f *fleet) isHot(key string) bool {
	m := f.hot.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[key]
	return ok
}

// Start starts the loop's goroutines: the reporter and poller, the leader's evaluator and
// the hot-set subscriber; none with a negative ReportInterval (the loop is off; Promote and
// Demote still work).
func (l *Loop) Start() {
	f := &l.fleet
	if l.o.ReportInterval < 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.ps = l.client.Subscribe(ctx, l.keys().Channel)
	f.wg.Add(3)
	go func() { defer f.wg.Done(); l.subscribeLoop(ctx, f.ps) }()
	go func() { defer f.wg.Done(); l.reportLoop(ctx) }()
	go func() { defer f.wg.Done(); l.evalLoop(ctx) }()
}

func (f *fleet) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	if f.ps != nil {
		_ = f.ps.Close()
	}
	f.wg.Wait()
}

// sleep waits for d or ctx; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// reportLoop reports this instance's heaviest Redis-level reads once per interval, at a
// random phase so that the fleet's reports spread over the interval, or earlier in the
// interval when a key that is not hot crosses EarlyReportRate locally. It checks every
// quarter interval; the hot set is polled once per PollInterval.
func (l *Loop) reportLoop(ctx context.Context) {
	iv := l.o.ReportInterval
	// The phase leaves the interval's last tick free: a phase in the last tick of the interval
	// could fall between two ticks in every interval, and the instance would never report.
	l.fleet.phase = time.Duration(l.o.Rand() % uint64(iv-iv/reportTicks))
	if !sleep(ctx, time.Duration(l.o.Rand()%uint64(iv/reportTicks))) {
		return
	}
	tick := time.NewTicker(iv / reportTicks)
	defer tick.Stop()
	for {
		l.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// reportTicks is how many times per interval an instance checks for a report (an early one
// as soon as a key crosses EarlyReportRate); the check is local, only a report is a command.
const reportTicks = 10

// subTicks is how many times per interval the leader evaluates the interval under way while
// it watches it (after a nudge), and the most partial evaluations it makes in an interval,
// however many reports nudge it.
const subTicks = 4

func (l *Loop) tick(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, l.stepTimeout())
	defer cancel()
	if err := l.report(cctx); err != nil {
		l.loopError("report", err)
	}
	f := &l.fleet
	every := int64(max(1, reportTicks*l.o.PollInterval/l.o.ReportInterval))
	poll := l.pollFast() && f.ticks%reportTicks == 0 || f.ticks%every == 0
	retry := f.ticks%reportTicks == 0
	at := f.ticks
	f.ticks++
	if poll {
		quiet, err := l.poll(cctx)
		if err != nil {
			l.loopError("poll", err)
		}
		f.quietTill = at + min(heartbeatsMissed*reportTicks, ceilDiv(quiet, l.o.ReportInterval/reportTicks))
	}
	if retry {
		// Once per interval, not only at a poll: with a live channel polls come once per
		// PollInterval, and a key whose copies failed to warm would be read from its one
		// node that long.
		l.retryPromotions(cctx)
	}
}

// heartbeatsMissed is how many report intervals without a message on the hot-set channel
// make an instance take its subscription (or the leader) for lost and poll every interval.
const heartbeatsMissed = 3

// pubSubLive reports whether this instance heard the hot-set channel (the leader's heartbeat
// or an announcement) within the last heartbeatsMissed intervals: then the channel delivers
// every change and polling can be slow.
func (l *Loop) pubSubLive() bool {
	heard := l.fleet.heard.Load()
	return heard != 0 && l.o.Clock().UnixNano()-heard < int64(heartbeatsMissed*l.o.ReportInterval)
}

// pollFast reports whether this instance polls every interval: as the leader (to renew its
// lease), or when it has heard nothing on the hot-set channel for heartbeatsMissed intervals.
// A new instance gives the channel that long after its first poll before it polls again. A
// poll that found another instance's live lease and the version applied here (the leader's
// heartbeat is late, no change was missed) is as good as a heartbeat until that lease would
// expire, heartbeatsMissed intervals at most: a slow leader does not make the whole fleet
// poll every interval, a missed change is read by the next poll, and a lost leader's lease is
// taken over as soon as it expires.
func (l *Loop) pollFast() bool {
	f := &l.fleet
	if f.leader.Load() {
		return true
	}
	if f.ticks < f.quietTill {
		return false
	}
	last := max(f.heard.Load(), f.firstPoll.Load())
	return last == 0 || l.o.Clock().UnixNano()-last >= int64(heartbeatsMissed*l.o.ReportInterval)
}

// ceilDiv returns d/unit rounded up; unit is positive.
func ceilDiv(d, unit time.Duration) int64 { return int64((d + unit - 1) / unit) }

func (l *Loop) loopError(step string, err error) {
	if err == nil || l.closed.Load() {
		return
	}
	l.fleet.loopErrors.Add(1)
	if l.o.Logger != nil {
		l.o.Logger.Warn("celebrity: fleet loop", "step", step, "err", err)
	}
}

// evalLoop runs the leader's evaluations: just after an interval ends, on the whole summary
// of the interval that ended (promotions and demotions, then the heartbeat); and on the part
// of an interval's summary reported so far (promotions only: a partial sum never overstates a
// key's rate, so it promotes only what the whole sum would) when a report nudges it (a key's
// sum on one summary shard crossed PromoteRate/SummaryShards), and then every quarter
// interval until that interval ends, since the other shards may cross later. A nudge is
// evaluated at once unless a partial evaluation already ran in the same quarter interval;
// then the next quarter's evaluation covers it. So the leader makes at most one full and
// subTicks partial evaluations per interval, whatever the number of nudging reports.
func (l *Loop) evalLoop(ctx context.Context) {
	f := &l.fleet
	iv := l.o.ReportInterval
	step := iv / subTicks
	for {
		now := l.o.Clock()
		next := now.Truncate(step).Add(step + iv/20)
		timer := time.NewTimer(next.Sub(now))
		nudged := false
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-f.nudge:
			timer.Stop()
			nudged = true
		}
		if !f.leader.Load() {
			continue
		}
		slot, partial, ok := f.evalTarget(nudged, l.o.Clock().UnixNano(), int64(iv))
		if !ok {
			continue
		}
		l.evalStep(ctx, slot, partial)
	}
}

// evalTarget decides what the leader evaluates at now (Unix ns; intervals of iv ns), woken by
// a nudge or by its timer: the interval a nudge names (partial, and watched from then on),
// the interval that just ended (whole, once), the watched interval under way or a nudge left
// over from the interval that just ended (partial); ok is false when there is nothing to
// evaluate. At most one partial evaluation runs per quarter interval: a nudge in a quarter
// that already had one waits for the next quarter's.
func (f *fleet) evalTarget(nudged bool, now, iv int64) (slot int64, partial, ok bool) {
	cur, quarter := now/iv, now/(iv/subTicks)
	if nudged {
		slot = min(f.nudgeSlot.Load(), cur)
		if slot < cur-1 {
			return 0, false, false // an old nudge: the full evaluation of its interval is done or due
		}
		f.watch = max(f.watch, slot)
		if f.quarter == quarter {
			f.pending = max(f.pending, slot)
			return 0, false, false
		}
		f.quarter = quarter
		return slot, true, true
	}
	switch {
	case cur-1 > f.lastEval:
		f.lastEval = cur - 1
		if f.pending <= cur-1 {
			f.pending = 0 // the whole summary holds the reports that nudged
		}
		return cur - 1, false, true
	case f.quarter == quarter:
		return 0, false, false
	case f.watch == cur:
		f.quarter, f.pending = quarter, 0
		return cur, true, true
	case f.pending == cur-1:
		f.quarter, f.pending = quarter, 0
		return cur - 1, true, true
	}
	return 0, false, false
}

// evalStep is one evaluation by the leader, with the node-load measure before a full one and
// the heartbeat after it.
func (l *Loop) evalStep(ctx context.Context, slot int64, partial bool) {
	cctx, cancel := context.WithTimeout(ctx, l.stepTimeout())
	defer cancel()
	f := &l.fleet
	if !partial && l.o.PromoteShare > 0 && (len(f.nodes.prev) == 0 || f.fullEvaluations.Load()%nodeLoadEvery == 0) {
		if err := l.measureNodes(cctx); err != nil {
			l.loopError("node load", err)
		}
	}
	if err := l.evaluate(cctx, slot, partial); err != nil {
		l.loopError("evaluate", err)
	}
	if !partial && f.leader.Load() {
		l.heartbeat(cctx)
	}
}

// subscribeLoop learns the hot set as soon as its leader announces a new version. Every
// message (a change, or the leader's heartbeat once per interval) carries the version; one
// that differs from the version applied here is read at once (learn), and hearing one tells
// the report loop that the channel (and a leader) is live. A report's nudge is not counted:
// reports nudge while no leader is left to hear them.
func (l *Loop) subscribeLoop(ctx context.Context, ps *redis.PubSub) {
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			if s, ok := strings.CutPrefix(msg.Payload, "n"); ok {
				if size, ok := strings.CutPrefix(s, "f"); ok {
					l.fleet.heardSize(size, l.o.Clock().UnixNano())
				} else {
					l.nudged(s) // a report's: it says nothing of the leader
				}
				continue
			}
			l.fleet.heard.Store(l.o.Clock().UnixNano())
			if l.fleet.isApplied(msg.Payload) {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, l.stepTimeout())
			if !l.applyAnnouncement(cctx, msg.Payload) {
				if err := l.learn(cctx); err != nil {
					l.loopError("learn", err)
				}
			}
			cancel()
		}
	}
}

// nudged passes a report's nudge (the interval whose summary crossed a shard's share of
// PromoteRate) to the leader's evaluation loop; other instances ignore it.
func (l *Loop) nudged(slot string) {
	f := &l.fleet
	n, err := strconv.ParseInt(slot, 10, 64)
	if err != nil || !f.leader.Load() {
		return
	}
	f.nudgeSlot.Store(n)
	select {
	case f.nudge <- struct{}{}:
	default: // an evaluation is already due
	}
}

// heartbeat publishes the hot set's version as the leader applies it, unless this instance
// published within the last half interval: the fleet's instances hear that the channel is
// live (so they poll only every PollInterval), and one that missed a change learns it.
func (l *Loop) heartbeat(ctx context.Context) {
	f := &l.fleet
	now := l.o.Clock().UnixNano()
	if now-f.published.Load() < int64(l.o.ReportInterval/2) {
		return
	}
	f.heartbeats.Add(1)
	if err := l.publish(ctx); err != nil {
		l.loopError("heartbeat", err)
	}
	l.announceSize(ctx, now)
}

// announceSize publishes the leader's estimate of the fleet's size as "nf<size>" when it
// moved by a tenth or more since it was last published, or sizeEvery intervals passed: every
// instance then reports in turns within an interval of the estimate, not a PollInterval
// later. The message starts as a nudge does, which a release that does not know it ignores
// (it names no interval).
func (l *Loop) announceSize(ctx context.Context, now int64) {
	f := &l.fleet
	n := f.fleetN.Load()
	if !f.estimated.Load() || n <= 0 {
		return
	}
	moved := f.sizeSent == 0 || 10*abs(n-f.sizeSent) >= f.sizeSent
	if !moved && now-f.sizeSentAt < sizeEvery*int64(l.o.ReportInterval) {
		return
	}
	f.loopCommands.Add(1)
	if err := l.client.Publish(ctx, l.keys().Channel, "nf"+strconv.FormatInt(n, 10)).Err(); err != nil {
		l.loopError("announce the fleet's size", err)
		return
	}
	f.sizeSent, f.sizeSentAt = n, now
}

// sizeEvery is how many intervals apart the leader publishes the fleet's size when it holds
// steady.
const sizeEvery = 10

func abs(n int64) int64 { return max(n, -n) }

// heardSize takes the fleet's size the leader published (see announceSize); the leader keeps
// its own estimate.
func (f *fleet) heardSize(s string, now int64) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || f.leader.Load() {
		return
	}
	f.setSize(n, now)
}

// setSize takes the fleet's size a leader stated at now (by announcement or in the hot set's
// meta, read by a poll); 0 states none.
func (f *fleet) setSize(n, now int64) {
	f.fleetN.Store(n)
	if n > 0 {
		f.sizeAt.Store(now)
	}
}

// sizeLife is how many intervals a stated fleet size lasts without a leader stating it again
// (the leader announces it at least every sizeEvery intervals and writes it with every poll).
const sizeLife = 3 * sizeEvery

// publish announces the version this instance applies on the hot-set channel, as
// "<version> <vid>".
func (l *Loop) publish(ctx context.Context) error {
	l.fleet.loopCommands.Add(1)
	l.fleet.published.Store(l.o.Clock().UnixNano())
	v, vid := l.fleet.applied()
	return l.client.Publish(ctx, l.keys().Channel, strconv.FormatUint(v, 10)+" "+vid).Err()
}

// applied returns the version of the hot set this instance applies and its vid.
func (f *fleet) applied() (uint64, string) {
	vid := "-"
	if p := f.vid.Load(); p != nil {
		vid = *p
	}
	return f.version.Load(), vid
}

// isApplied reports whether a heartbeat's payload "<version> <vid>" (or "<version>", from a
// release before vids) names the version this instance applies.
func (f *fleet) isApplied(payload string) bool {
	head, vid, withVid := strings.Cut(payload, " ")
	v, err := strconv.ParseUint(head, 10, 64)
	if err != nil {
		return false
	}
	cur, curVid := f.applied()
	return v == cur && (!withVid || vid == curVid)
}

// stepTimeout bounds one step of the loop: an interval, but never under a second, so that a
// slow moment does not fail every step.
func (l *Loop) stepTimeout() time.Duration { return max(l.o.ReportInterval, time.Second) }
