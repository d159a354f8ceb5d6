package migrate

import (
	"context"
	"errors"
	"fmt"

	"github.com/celebrity-go/celebrity/routing"
)

// Cancel cancels migration id if it has not closed the source yet (OwnedA, Copying,
// CatchingUp): the target's copy is deleted, its ownership record is left "cancelled" (it
// refuses everything) and the source keeps owning the unit. A Cancel of a cancelled
// migration returns its status again. From ClosedA on it returns ErrCancelRefused: such a
// migration only finishes forward (see Resume). A driver running the migration elsewhere
// stops at its next step with ErrCancelled.
func (c *Coordinator) Cancel(ctx context.Context, id string) (Status, error) {
	s, err := c.load(ctx, id)
	if err != nil {
		return s, err
	}
	r := &run{Status: s}
	if r.State.Cancellable() {
		err = c.step(ctx, &r.Status, []State{OwnedA, Copying, CatchingUp}, Cancelling, false,
			"reason", "cancelled by operator")
		var se *stateError
		if errors.As(err, &se) {
			if r.Status, err = c.load(ctx, id); err != nil {
				return r.Status, err
			}
		} else if err != nil {
			return r.Status, err
		}
	}
	switch r.State {
	case Cancelling:
		if err := c.finishCancel(ctx, r); err != nil {
			return r.Status, err
		}
		return r.Status, nil
	case Cancelled:
		return r.Status, nil
	}
	return r.Status, fmt.Errorf("%w: migration %q is %s", ErrCancelRefused, id, r.State)
}

// finishCancel removes the target's copy, reopens the source if this migration closed it,
// and ends the migration Cancelled or Aborted, releasing the unit's lock.
func (c *Coordinator) finishCancel(ctx context.Context, r *run) error {
	if err := c.prepare(ctx, r, "abandon"); err != nil {
		return err
	}
	if r.reopen {
		closed := routing.Ownership{Generation: r.SourceGen, State: routing.StateClosed}
		open := routing.Ownership{Generation: r.SourceGen, State: routing.StateOpen}
		_, err := c.shards[r.Source].r.Transition(ctx, r.Unit, closed, open)
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
	return c.step(ctx, &r.Status, []State{Cancelling}, end, true)
}
