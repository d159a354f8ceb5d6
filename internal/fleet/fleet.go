// Package fleet is the fleet loop of a celebrity.Cache: each instance reports its heaviest
// Redis-level reads to a summary sharded over the masters, a leader (a lease, fenced by an
// epoch) sums the summary and promotes or demotes keys in a versioned hot set, and every
// instance learns each change by pub/sub or by its polls. The package's doc of the protocol
// and its cost is the root package's (doc.go, "The closed loop"); this package is the
// machinery, not generic in the cache's value type, so that the Cache keeps only the cache.
package fleet

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/replicas"
)

// Options are the loop's options, checked and filled in by the Cache (celebrity.Options
// documents each field, its default and its range).
type Options struct {
	Prefix, InstanceID             string
	ReportInterval, PollInterval   time.Duration
	PromoteRate, DemoteRate        float64
	PromoteShare, ShareMinRate     float64
	Hold                           time.Duration
	MaxHot, ReportTop              int
	ReportMinRate, EarlyReportRate float64
	HotReportEvery                 int
	SlowReportEvery                int
	SummaryShards                  int
	ReportsPerInterval             int

	// OnEvent receives the promotions and demotions this instance applies; OnDemote is told
	// of a demotion before it (the cache forgets the key's refresh state).
	OnEvent  func(Event)
	OnDemote func(key string)
	Logger   *slog.Logger
	Clock    func() time.Time
	Rand     func() uint64
}

// Loop is one instance's part of the fleet loop. Observe, IsHot and Members are safe for
// concurrent use and cheap (the read path calls them); the rest runs on the Loop's own
// goroutines, started by Start and stopped by Close.
type Loop struct {
	fleet

	o       Options
	client  redis.UniversalClient
	rep     *replicas.Replicator
	cluster bool
	// fleetID is this instance's ID in the loop (leader lease, fencing, report IDs):
	// "<InstanceID>/<nonce>", so two instances given one InstanceID never share a leadership
	// or drop each other's reports as retries.
	fleetID string
	// sumTags are the summary shards' keys less their interval (SummaryTags).
	sumTags []string
	det     *hotkeys.Detector
	// slow is the slow lane's detector (SlowReportEvery): the last interval's Redis-level
	// reads, sampled once per interval; nil when the lane is off.
	slow      *hotkeys.Detector
	closed    atomic.Bool
	closeOnce sync.Once
}

// New returns the loop of one instance over client, whose promotions warm copies through
// rep (on a cluster client). nonce makes the instance's ID in the loop its own. It starts
// nothing: Start does.
func New(client redis.UniversalClient, rep *replicas.Replicator, o Options, nonce string) (*Loop, error) {
	l := &Loop{o: o, client: client, rep: rep, fleetID: o.InstanceID + "/" + nonce,
		sumTags: SummaryTags(o.Prefix, o.SummaryShards)}
	_, l.cluster = client.(*redis.ClusterClient)
	empty := map[string]Member{}
	l.hot.Store(&empty)
	l.nudge = make(chan struct{}, 1)
	if err := l.detectors(); err != nil {
		l.closeDetectors()
		return nil, err
	}
	return l, nil
}

// detectors builds the local detector of Redis-level reads (its window is half an interval,
// the promote decision's; Hold governs demotion) and, with SlowReportEvery, the slow lane's
// (one interval, sampled once per interval).
func (l *Loop) detectors() error {
	o := l.o
	var err error
	window := o.ReportInterval / 2 // the promote decision's window; Hold governs demotion
	if window <= 0 {
		window = time.Second / 2
	}
	l.born = o.Clock().UnixNano()
	l.det, err = hotkeys.New(hotkeys.Options{
		SampleRate: 1, Capacity: 256, Window: window, Buckets: 4, EvalInterval: -1,
		MinSamples: 1, TopK: o.ReportTop, Clock: o.Clock,
	})
	if err != nil {
		return err
	}
	if o.SlowReportEvery > 0 && o.ReportInterval > 0 {
		l.slow, err = hotkeys.New(hotkeys.Options{
			SampleRate: 1, Capacity: slowCapacity, Window: o.ReportInterval, Buckets: 10, EvalInterval: -1,
			MinSamples: 1, TopK: min(slowTop*o.ReportTop, slowCapacity), Clock: o.Clock,
		})
	}
	return err
}

func (l *Loop) closeDetectors() {
	if l.slow != nil {
		_ = l.slow.Close()
	}
	if l.det != nil {
		_ = l.det.Close()
	}
}

// Stop stops the loop's goroutines and waits for them; the detectors still take Observe
// calls (a read in flight when its Cache closes). It is idempotent.
func (l *Loop) Stop() {
	if !l.closed.Swap(true) {
		l.stop()
	}
}

// Close stops the loop (Stop) and closes its detectors; call it after the last Observe. It
// is idempotent.
func (l *Loop) Close() {
	l.Stop()
	l.closeOnce.Do(l.closeDetectors)
}

// IsHot reports whether key is in the hot set this instance applies.
func (l *Loop) IsHot(key string) bool { return l.isHot(key) }

// Members returns the keys of the hot set this instance applies; the map must not be
// changed.
func (l *Loop) Members() map[string]Member { return *l.hot.Load() }

// Hot returns the keys of the hot set as this instance applies it, sorted.
func (l *Loop) Hot() []string {
	m := *l.hot.Load()
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Promote adds key to the hot set by hand; Demote removes it. This instance applies the
// change before they return.
func (l *Loop) Promote(ctx context.Context, key string) error {
	return l.apply(ctx, "", 0, []any{"m+", key, "0"})
}

// Demote removes key from the hot set (see Promote).
func (l *Loop) Demote(ctx context.Context, key string) error {
	return l.apply(ctx, "", 0, []any{"m-", key, "0"})
}

// EventKind says what an Event reports.
type EventKind int

const (
	// Promoted: this instance applied a key's promotion (its copies are warm).
	Promoted EventKind = iota + 1
	// Demoted: this instance applied a key's demotion.
	Demoted
)

// Event is a change of the hot set as this instance applies it (celebrity.Event documents
// the fields).
type Event struct {
	Kind       EventKind
	Key        string
	Rate       float64
	Manual     bool
	HotVersion uint64
	Decided    time.Time
	At         time.Time
}

// Stats is a snapshot of the loop's counters (celebrity.Stats documents them).
type Stats struct {
	Hot                                     int
	HotVersion                              uint64
	Leader, PubSubLive                      bool
	Polls, Heartbeats, Reports, Evaluations uint64
	FullEvaluations, Promotions, Demotions  uint64
	LoopCommands, LoopErrors, Fenced        uint64
	DuplicateInstanceIDs                    uint64
}

// Stats returns a snapshot of the counters; fields are read one by one.
func (l *Loop) Stats() Stats {
	f := &l.fleet
	return Stats{
		Hot: len(*f.hot.Load()), HotVersion: f.version.Load(),
		Leader: f.leader.Load(), PubSubLive: f.heard.Load() != 0 && l.o.ReportInterval > 0 && l.pubSubLive(),
		Polls: f.polls.Load(), Heartbeats: f.heartbeats.Load(), Reports: f.reports.Load(), Evaluations: f.evaluations.Load(),
		FullEvaluations: f.fullEvaluations.Load(), Promotions: f.promotions.Load(), Demotions: f.demotions.Load(),
		LoopCommands: f.loopCommands.Load(), LoopErrors: f.loopErrors.Load(), Fenced: f.fenced.Load(),
		DuplicateInstanceIDs: f.duplicates.Load(),
	}
}

// DemotedIn returns the interval (Unix time over ReportInterval) whose evaluation decided the
// last demotion this instance made as leader, if it was of key. Tests read it.
func (l *Loop) DemotedIn(key string) (int64, bool) {
	d := l.lastDemo.Load()
	if d == nil || d.key != key {
		return 0, false
	}
	return d.slot, true
}

// LastHotRead returns the latest interval in which this instance counted a read of key as a
// hot key's, or 0. Tests read it.
func (l *Loop) LastHotRead(key string) int64 {
	v, ok := l.hotReads.Load(key)
	if !ok {
		return 0
	}
	h := v.(*hotCount)
	var last int64
	for i := range h.slot {
		if h.n[i].Load() > 0 {
			last = max(last, h.slot[i].Load())
		}
	}
	return last
}

// FleetSize returns the fleet's size as this instance knows it (the leader's estimate, read
// by its polls), which sets how many intervals apart it reports.
func (l *Loop) FleetSize() int64 { return l.fleetN.Load() }
