package migrate

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a Coordinator's counters since it was built.
type Stats struct {
	Started          int64         // Started counts migrations started.
	Done             int64         // Done counts migrations this Coordinator finished (OwnedB).
	Cancelled        int64         // Cancelled counts migrations it ended Cancelled.
	Aborted          int64         // Aborted counts migrations it ended Aborted.
	StateChanges     int64         // StateChanges counts journal state changes it made.
	RecordsCopied    int64         // RecordsCopied counts snapshot items written to targets.
	LogApplied       int64         // LogApplied counts change-log entries applied to targets.
	Refused          int64         // Refused counts copied items the target refused or already held (older or equal version).
	Conflicts        int64         // Conflicts counts protocol conflicts met.
	VerifyFailures   int64         // VerifyFailures counts digest mismatches.
	SnapshotRestarts int64         // SnapshotRestarts counts copies restarted after a log trim.
	Takeovers        int64         // Takeovers counts migrations this Coordinator took over as driver (a new fencing epoch each).
	Fenced           int64         // Fenced counts steps refused because another driver had taken the migration over.
	VerifyPasses     int64         // VerifyPasses counts full verification passes (scans of both sides).
	VerifyResumed    int64         // VerifyResumed counts drives that continued a verification an earlier drive in this process had made.
	LastPause        time.Duration // LastPause is the write pause (barrier to flip) of the last finished migration.
}

type stats struct {
	started, done, cancelled, aborted, steps atomic.Int64
	copied, logApplied, refused, conflicts   atomic.Int64
	verifyFailures, restarts, lastPause      atomic.Int64
	takeovers, fenced                        atomic.Int64
	verifyPasses, verifyResumed              atomic.Int64
}

// Stats returns a snapshot of the counters.
func (c *Coordinator) Stats() Stats {
	s := &c.stats
	return Stats{
		Started: s.started.Load(), Done: s.done.Load(), Cancelled: s.cancelled.Load(), Aborted: s.aborted.Load(),
		StateChanges: s.steps.Load(), RecordsCopied: s.copied.Load(), LogApplied: s.logApplied.Load(),
		Refused: s.refused.Load(), Conflicts: s.conflicts.Load(), VerifyFailures: s.verifyFailures.Load(),
		SnapshotRestarts: s.restarts.Load(), Takeovers: s.takeovers.Load(), Fenced: s.fenced.Load(),
		VerifyPasses: s.verifyPasses.Load(), VerifyResumed: s.verifyResumed.Load(), LastPause: time.Duration(s.lastPause.Load()),
	}
}
