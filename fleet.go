package celebrity

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// fleet is the state of the detect → promote → demote loop on one instance.
type fleet struct {
	hot        atomic.Pointer[map[string]member] // the hot set as this instance applies it
	version    atomic.Uint64                     // the hot set version applied
	hotEntries sync.Map                          // key -> *entry[V] last installed for a hot key
	learnMu    sync.Mutex

	leader    atomic.Bool
	epoch     atomic.Int64
	lowSince  map[string]int64 // leader only: the first interval of a member's run under DemoteRate
	lastSlot  int64            // the last interval this instance made its regular report for
	earlySlot int64            // the last interval this instance made an early report for
	sent      map[string]bool  // the keys this instance reported for the interval lastSlot/earlySlot
	sentSlot  int64            // the interval sent describes
	phase     time.Duration    // when in each interval this instance reports, unless early
	lastEval  int64            // the last interval this instance evaluated as leader
	nodes     nodeLoad         // leader only: the masters' commands per second (PromoteShare)
	ticks     int64            // the report loop's ticks
	warnAlone sync.Once

	heard     atomic.Int64 // when this instance last heard the hot-set channel, Unix nanoseconds
	published atomic.Int64 // when this instance last published on it, Unix nanoseconds

	cancel context.CancelFunc
	wg     sync.WaitGroup
	ps     *redis.PubSub

	sourceLoads, reports, evaluations, promotions, demotions atomic.Uint64
	refreshes, loopCommands, loopErrors, fenced, polls       atomic.Uint64
}

// member is one key of the hot set.
type member struct {
	Manual bool
	Rate   float64
	Since  time.Time
}

func (f *fleet) isHot(key string) bool {
	m := f.hot.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[key]
	return ok
}

// startFleet starts the loop's goroutines: the reporter and poller, the leader's evaluator,
// the hot-set subscriber and refresh-ahead.
func (c *Cache[V]) startFleet() {
	f := &c.fleet
	empty := map[string]member{}
	f.hot.Store(&empty)
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	if c.o.RefreshAhead > 0 {
		f.wg.Add(1)
		go func() { defer f.wg.Done(); c.refreshLoop(ctx) }()
	}
	if c.o.ReportInterval < 0 {
		return
	}
	f.ps = c.client.Subscribe(ctx, c.keys().channel)
	f.wg.Add(3)
	go func() { defer f.wg.Done(); c.subscribeLoop(ctx, f.ps) }()
	go func() { defer f.wg.Done(); c.reportLoop(ctx) }()
	go func() { defer f.wg.Done(); c.evalLoop(ctx) }()
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
func (c *Cache[V]) reportLoop(ctx context.Context) {
	iv := c.o.ReportInterval
	c.fleet.phase = time.Duration(rand.Int64N(int64(iv)))
	if !sleep(ctx, time.Duration(rand.Int64N(int64(iv/subTicks)))) {
		return
	}
	tick := time.NewTicker(iv / subTicks)
	defer tick.Stop()
	for {
		c.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// subTicks is how many times per interval the loop checks for a report and the leader
// evaluates the interval under way.
const subTicks = 4

func (c *Cache[V]) tick(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, c.stepTimeout())
	defer cancel()
	if err := c.report(cctx); err != nil {
		c.loopError("report", err)
	}
	f := &c.fleet
	every := int64(max(1, subTicks*c.o.PollInterval/c.o.ReportInterval))
	fast := f.leader.Load() || !c.pubSubLive()
	poll := fast && f.ticks%subTicks == 0 || f.ticks%every == 0
	f.ticks++
	if poll {
		if err := c.poll(cctx); err != nil {
			c.loopError("poll", err)
		}
	}
}

// heartbeatsMissed is how many report intervals without a message on the hot-set channel
// make an instance take its subscription (or the leader) for lost and poll every interval.
const heartbeatsMissed = 3

// pubSubLive reports whether this instance heard the hot-set channel (the leader's heartbeat
// or an announcement) within the last heartbeatsMissed intervals: then the channel delivers
// every change and polling can be slow.
func (c *Cache[V]) pubSubLive() bool {
	heard := c.fleet.heard.Load()
	return heard != 0 && c.o.Clock().UnixNano()-heard < int64(heartbeatsMissed*c.o.ReportInterval)
}

func (c *Cache[V]) loopError(step string, err error) {
	if err == nil || c.closed.Load() {
		return
	}
	c.fleet.loopErrors.Add(1)
	if c.o.Logger != nil {
		c.o.Logger.Warn("celebrity: fleet loop", "step", step, "err", err)
	}
}

// evalLoop runs the leader's evaluation every quarter interval: just after an interval ends,
// on the whole summary of the interval that ended (promotions and demotions); in between, on
// the part of the current interval's summary reported so far (promotions only: a partial sum
// never overstates a key's rate, so it promotes only what the whole sum would).
func (c *Cache[V]) evalLoop(ctx context.Context) {
	iv := c.o.ReportInterval
	step := iv / subTicks
	for {
		now := c.o.Clock()
		next := now.Truncate(step).Add(step + iv/20)
		if !sleep(ctx, next.Sub(now)) {
			return
		}
		if !c.fleet.leader.Load() {
			continue
		}
		cur := c.o.Clock().UnixNano() / int64(iv)
		slot, partial := cur-1, false
		if slot <= c.fleet.lastEval {
			slot, partial = cur, true
		} else {
			c.fleet.lastEval = slot
		}
		cctx, cancel := context.WithTimeout(ctx, c.stepTimeout())
		if !partial && c.o.PromoteShare > 0 {
			if err := c.measureNodes(cctx); err != nil {
				c.loopError("node load", err)
			}
		}
		if err := c.evaluate(cctx, slot, partial); err != nil {
			c.loopError("evaluate", err)
		}
		if !partial && c.fleet.leader.Load() {
			c.heartbeat(cctx)
		}
		cancel()
	}
}

// subscribeLoop learns the hot set as soon as its leader announces a new version. Every
// message (a change, or the leader's heartbeat once per interval) carries the version; one
// that differs from the version applied here is read at once (learn), and hearing any
// message tells the report loop that the channel is live.
func (c *Cache[V]) subscribeLoop(ctx context.Context, ps *redis.PubSub) {
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			c.fleet.heard.Store(c.o.Clock().UnixNano())
			if v, err := strconv.ParseUint(msg.Payload, 10, 64); err == nil && v == c.fleet.version.Load() {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, c.stepTimeout())
			if err := c.learn(cctx); err != nil {
				c.loopError("learn", err)
			}
			cancel()
		}
	}
}

// heartbeat publishes the hot set's version as the leader applies it, unless this instance
// published within the last half interval: the fleet's instances hear that the channel is
// live (so they poll only every PollInterval), and one that missed a change learns it.
func (c *Cache[V]) heartbeat(ctx context.Context) {
	f := &c.fleet
	now := c.o.Clock().UnixNano()
	if now-f.published.Load() < int64(c.o.ReportInterval/2) {
		return
	}
	if err := c.publish(ctx, f.version.Load()); err != nil {
		c.loopError("heartbeat", err)
	}
}

// publish announces version on the hot-set channel.
func (c *Cache[V]) publish(ctx context.Context, version uint64) error {
	c.fleet.loopCommands.Add(1)
	c.fleet.published.Store(c.o.Clock().UnixNano())
	return c.client.Publish(ctx, c.keys().channel, strconv.FormatUint(version, 10)).Err()
}

// stepTimeout bounds one step of the loop: an interval, but never under a second, so that a
// slow moment does not fail every step.
func (c *Cache[V]) stepTimeout() time.Duration { return max(c.o.ReportInterval, time.Second) }
