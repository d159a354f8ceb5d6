package migrate

import (
	"context"
	"errors"
	"fmt"

	"github.com/celebrity-go/celebrity/routing"
)

// Cancel cancels migration id if it has not closed the source yet (OwnedA, Copying,
// CatchingUp), or finishes the cancellation of one that is Cancelling: the target's copy is
// deleted, its ownership record is left "cancelled" (it refuses everything) and the source
// keeps (or gets back) the unit open. A Cancel of a cancelled migration returns its status
// again. From ClosedA on it returns ErrCancelRefused and changes nothing: such a migration
// only finishes forward (see Resume).
//
// Cancel takes the migration over at once, even from a live driver, with a new fencing
// epoch written to the journal before it acts: the driver is refused at its next step (it
// returns ErrFenced) and can no longer claim, fill or open the target. Cancel always
// terminates: it either returns the unit to its source with the target clean, or refuses
// with a reason. If the target holds a claim of another migration, that claim holds nothing
// of this one; see [Coordinator.ClearClaim] to clear a claim left by a finished migration.
func (c *Coordinator) Cancel(ctx context.Context, id string) (Status, error) {
	r, err := c.acquire(ctx, id, true, cancelStates, string(Cancelling), "reason", "cancelled by operator")
	if err != nil {
		return r.Status, err
	}
	if r.epoch == 0 {
		if r.State == Cancelled {
			return r.Status, nil
		}
		return r.Status, fmt.Errorf("%w: migration %q is %s", ErrCancelRefused, id, r.State)
	}
	if err := c.finishCancel(ctx, r); err != nil {
		return r.Status, err
	}
	return r.Status, nil
}

// finishCancel removes the target's copy, reopens the source if this migration closed it,
// and ends the migration Cancelled or Aborted, releasing the unit's lock. Every change is
// fenced by r's epoch.
func (c *Coordinator) finishCancel(ctx context.Context, r *run) error {
	if r.splitting() {
		return c.splitCancel(ctx, r)
	}
	if err := c.prepare(ctx, r, "abandon"); err != nil {
		return err
	}
	if r.reopen {
		closed := routing.Ownership{Generation: r.SourceGen, State: routing.StateClosed}
		open := routing.Ownership{Generation: r.SourceGen, State: routing.StateOpen}
		_, err := c.reopenSource(ctx, r, closed, open)
		if err != nil && !errors.Is(err, routing.ErrOwnershipChanged) {
			return fmt.Errorf("migrate: reopen source: %w", err)
		}
	}
	end := Cancelled
	if r.abort {
		end = Aborted
		c.stats.aborted.Add(1)
	} else {
		c.stats.cancelled.Add(1)
	}
	return c.step(ctx, r, []State{Cancelling}, end, true)
}
