package routing

import (
	"errors"
	"fmt"
)

// ErrStaleRoute reports that a shard refused an operation because the route the caller
// carried is not (or no longer) allowed to touch the unit there: the shard's ownership
// record is newer than the caller's generation, the unit is closed or being imported, the
// tenant moved out of the bucket, or the shard holds no ownership record for the unit at all.
// Nothing was changed. The errors carry a [*StaleRouteError] with the shard's view.
var ErrStaleRoute = errors.New("routing: stale route")

// ErrConflict reports that an operation ID was reused for a different operation in the same
// unit. The first operation's result stays recorded; nothing was changed.
var ErrConflict = errors.New("routing: operation ID reused for a different operation")

// ErrVersionMismatch reports that a conditional Put or Delete found another version than the
// one it expected. The outcome is recorded under the operation ID like any other result, so a
// retry of the same operation reports the same mismatch.
var ErrVersionMismatch = errors.New("routing: version mismatch")

// ErrNoTable reports that no route table has been loaded yet or none is published.
var ErrNoTable = errors.New("routing: no route table")

// ErrInvalidTable reports a table that fails [Table.Validate]. The wrapped message names the
// offending field.
var ErrInvalidTable = errors.New("routing: invalid table")

// ErrGenerationConflict reports a Publish whose generation is not exactly the current
// generation + 1 (see [Store.Publish]).
var ErrGenerationConflict = errors.New("routing: generation conflict")

// ErrOwnershipChanged reports that [Shard.Transition] found an ownership record other than
// the one the caller expected; nothing was changed.
var ErrOwnershipChanged = errors.New("routing: ownership changed")

// ErrFenced reports that a fenced change ([Shard.TransitionFenced]) was refused because an
// actor with a higher fencing epoch already acted on the unit's record, or that a guarded
// publication ([Store.PublishGuarded]) found its guard changed. Nothing was changed. The
// actor lost its right to act and must stop.
var ErrFenced = errors.New("routing: fenced: a later actor took over")

// FencedError is the typed form of [ErrFenced] for a shard's ownership record.
type FencedError struct {
	Unit  Unit   // Unit is the unit whose record refused the change.
	Shard string // Shard names the shard.
	Epoch uint64 // Epoch is the caller's fencing epoch.
	Fence uint64 // Fence is the highest epoch that acted on the record.
}

// Error implements error.
func (e *FencedError) Error() string {
	return fmt.Sprintf("routing: %s on shard %q is fenced at epoch %d; caller's epoch %d is older",
		e.Unit, e.Shard, e.Fence, e.Epoch)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// ErrTenantHasData reports that [Router.Provision] refused to open a unit of its own for a
// tenant that still has data (records, tombstones or idempotency records) in its hash
// bucket. Nothing was changed; move the tenant with a migration.
var ErrTenantHasData = errors.New("routing: tenant has data in its bucket")

// ErrInvalid is wrapped by every error about bad options or bad arguments (an empty
// tenant or operation ID, a bad unit, an option out of range); the message names the field
// and the allowed range. Nothing was changed.
var ErrInvalid = errors.New("routing: invalid input")

// ErrNotReady reports that [Shard.TransitionFencedIfReady] found the unit's record as
// expected but without the required ready mark; nothing was changed. It also matches
// ErrOwnershipChanged.
var ErrNotReady = fmt.Errorf("%w: the record lacks its ready mark", ErrOwnershipChanged)

// ErrClosed reports a call on a closed Router.
var ErrClosed = errors.New("routing: router closed")

// StaleRouteError is the typed form of [ErrStaleRoute]: the unit, the generation the caller
// sent, and the shard's ownership record as it was when the shard refused.
type StaleRouteError struct {
	Shard string    // Shard is the name of the shard that refused.
	Unit  Unit      // Unit is the placement unit addressed.
	Sent  uint64    // Sent is the route generation the caller carried.
	Owner Ownership // Owner is the shard's record; Owner.State is "" when there is none.
	Moved bool      // Moved is true when the tenant was moved out of the bucket.
}

// Error implements error.
func (e *StaleRouteError) Error() string {
	switch {
	case e.Owner.State == "":
		return fmt.Sprintf("routing: stale route: shard %q holds no ownership record for %s (sent generation %d)",
			e.Shard, e.Unit, e.Sent)
	case e.Moved:
		return fmt.Sprintf("routing: stale route: tenant moved out of %s on shard %q (sent generation %d)",
			e.Unit, e.Shard, e.Sent)
	default:
		return fmt.Sprintf("routing: stale route: shard %q has %s at generation %d state %q, sent generation %d",
			e.Shard, e.Unit, e.Owner.Generation, e.Owner.State, e.Sent)
	}
}

// Is makes errors.Is(err, ErrStaleRoute) true.
func (e *StaleRouteError) Is(target error) bool { return target == ErrStaleRoute }

// VersionMismatchError is the typed form of [ErrVersionMismatch].
type VersionMismatchError struct {
	Key      string // Key is the record key.
	Expected uint64 // Expected is the version the caller required.
	Current  uint64 // Current is the version found (0 for absent or deleted).
}

// Error implements error.
func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("routing: version mismatch on %q: expected %d, found %d", e.Key, e.Expected, e.Current)
}

// Is makes errors.Is(err, ErrVersionMismatch) true.
func (e *VersionMismatchError) Is(target error) bool { return target == ErrVersionMismatch }

// invalidf returns an error wrapping ErrInvalid with a message that names the field
// and the allowed range.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
