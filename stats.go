package celebrity

import (
	"time"

	"github.com/celebrity-go/celebrity/internal/fleet"

	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

// EventKind says what an Event reports.
type EventKind int

const (
	// EventPromoted: this instance applied a key's promotion (its copies are warm).
	EventPromoted = EventKind(fleet.Promoted)
	// EventDemoted: this instance applied a key's demotion.
	EventDemoted = EventKind(fleet.Demoted)
)

// String returns "promoted" or "demoted".
func (k EventKind) String() string {
	switch k {
	case EventPromoted:
		return "promoted"
	case EventDemoted:
		return "demoted"
	}
	return "unknown"
}

// Event is passed to Options.OnEvent when this instance applies a change of the hot set.
type Event struct {
	Kind EventKind
	Key  string
	// Rate is the fleet-wide rate of Redis-level reads per second that decided the change
	// (0 for a manual change).
	Rate float64
	// Manual says the change came from Promote or Demote.
	Manual bool
	// HotVersion is the hot set's version that carried the change.
	HotVersion uint64
	// Decided is when the fleet decided it (the hot set's record of the change; zero if
	// unknown).
	Decided time.Time
	// At is when this instance applied it.
	At time.Time
}

// Stats is a snapshot of a Cache's counters.
type Stats struct {
	// L1, Replicas and Invalidator are the parts' own counters.
	L1          l1cache.Stats
	Replicas    replicas.Stats
	Invalidator l1cache.InvalidatorStats
	// SourceLoads counts loader calls made by this instance.
	SourceLoads uint64
	// Hot is the size of the hot set applied here; HotVersion its version.
	Hot        int
	HotVersion uint64
	// Leader says this instance evaluates the fleet summary now.
	Leader bool
	// PubSubLive says this instance heard the hot-set channel (the leader's heartbeat or an
	// announcement) within the last 3 ReportIntervals, so it polls only every PollInterval.
	PubSubLive bool
	// Polls counts this instance's polls of the hot set's version (and of the leader lease);
	// Heartbeats the versions it published as the leader's heartbeat.
	Polls, Heartbeats uint64
	// Reports, Evaluations count the loop's reports and (as leader) evaluations, partial ones
	// (of the interval under way, promotions only) included.
	Reports, Evaluations uint64
	// FullEvaluations counts the evaluations (as leader) of an interval that had ended: the
	// ones that demote. A fleet-decided member cold for Hold is demoted by the
	// Hold/ReportInterval+1-th full evaluation after it turned cold.
	FullEvaluations uint64
	// Promotions and Demotions count hot-set changes applied here.
	Promotions, Demotions uint64
	// Refreshes counts refresh-ahead reloads of hot keys.
	Refreshes uint64
	// LoopCommands counts the Redis commands the fleet loop sent (reports, polls, summaries,
	// hot-set reads and changes, publishes); LoopErrors its failed steps; Fenced the leader's
	// changes refused because it had lost its lease.
	LoopCommands, LoopErrors, Fenced uint64
	// DuplicateInstanceIDs counts the other live instances this one found using its
	// InstanceID (as the fleet's leader, seen by two polls further apart than the leader
	// lease, so an earlier run of this process whose lease has not expired is not counted);
	// each is also logged as a warning. Invalidator.DuplicateInstanceIDs counts their
	// invalidations. Give every instance its own InstanceID.
	DuplicateInstanceIDs uint64
}

// Stats returns a snapshot of the counters; fields are read one by one.
func (c *Cache[V]) Stats() Stats {
	f := c.loop.Stats()
	return Stats{
		L1: c.l1.Stats(), Replicas: c.rep.Stats(), Invalidator: c.inv.Stats(),
		SourceLoads: c.sourceLoads.Load(), Hot: f.Hot, HotVersion: f.HotVersion,
		Leader: f.Leader, PubSubLive: f.PubSubLive,
		Polls: f.Polls, Heartbeats: f.Heartbeats, Reports: f.Reports, Evaluations: f.Evaluations,
		FullEvaluations: f.FullEvaluations,
		Promotions:      f.Promotions, Demotions: f.Demotions, Refreshes: c.refreshes.Load(),
		LoopCommands: f.LoopCommands, LoopErrors: f.LoopErrors, Fenced: f.Fenced,
		DuplicateInstanceIDs: f.DuplicateInstanceIDs,
	}
}
