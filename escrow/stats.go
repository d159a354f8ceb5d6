package escrow

import "sync/atomic"

// Stats is a snapshot of the counters of a Central limiter or a Pool.
type Stats struct {
	// Acquired counts new grants; Replayed counts acquires that found the job's grant.
	Acquired, Replayed uint64
	// Exhausted counts acquires refused with ErrExhausted.
	Exhausted uint64
	// Released counts releases that freed a permit; NoopReleases those that freed nothing
	// (a replay of an earlier release, or a job holding nothing).
	Released, NoopReleases uint64
	// Fenced counts operations refused with ErrFenced.
	Fenced uint64
	// Frozen, Accepted, Completed and Aborted count transfer steps that changed state.
	Frozen, Accepted, Completed, Aborted uint64
	// Reconciled counts ledgers brought back by Reconcile.
	Reconciled uint64
	// Restored counts permits put back by RestoreLost.
	Restored uint64
	// Reclaimed counts permits this process took back from jobs whose lease ended more than
	// LeaseSkew ago (in Acquire, Renew, Freeze and Sweep).
	Reclaimed uint64
}

type counters struct {
	acquired, replayed, exhausted, released, noop, fenced atomic.Uint64
	frozen, accepted, completed, aborted, reconciled      atomic.Uint64
	restored, reclaimed                                   atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Acquired: c.acquired.Load(), Replayed: c.replayed.Load(), Exhausted: c.exhausted.Load(),
		Released: c.released.Load(), NoopReleases: c.noop.Load(), Fenced: c.fenced.Load(),
		Frozen: c.frozen.Load(), Accepted: c.accepted.Load(), Completed: c.completed.Load(),
		Aborted: c.aborted.Load(), Reconciled: c.reconciled.Load(), Restored: c.restored.Load(),
		Reclaimed: c.reclaimed.Load(),
	}
}
