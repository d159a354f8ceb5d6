package migrate

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error about bad options or a bad request (an option out of
// range, an unknown unit or shard, a target equal to the source, a malformed ID); the
// message names the field and the allowed range. Nothing was changed.
var ErrInvalid = errors.New("migrate: invalid input")

// ErrBusy reports that another unfinished migration already holds the unit (or one of the
// units a carve-out, fold-back or split locks). Nothing was changed. The error carries a
// [*BusyError] naming the holder. Every Start reads the locks before the shards, so a
// second move of a unit or tenant that is moving gets ErrBusy, not the
// ErrOwnershipChanged of a target claimed by a migration that no longer runs.
var ErrBusy = errors.New("migrate: unit already migrating")

// ErrNotFound reports an unknown migration ID.
var ErrNotFound = errors.New("migrate: no such migration")

// ErrCancelRefused reports a Cancel of a migration that already closed the source: from
// ClosedA on, the migration only moves forward (Resume finishes it).
var ErrCancelRefused = errors.New("migrate: cancel refused after the source was closed")

// ErrCancelled reports that a migration was cancelled (by [Coordinator.Cancel]) while this
// call was driving it.
var ErrCancelled = errors.New("migrate: migration cancelled")

// ErrAborted reports that a migration stopped by itself before the target opened, because
// continuing would not be safe: the source's ownership changed underneath, the copy met a
// protocol conflict, or verification failed. The target holds no trace of the unit and the
// source owns it as before. The journal keeps the reason ([Status.Reason]).
var ErrAborted = errors.New("migrate: migration aborted")

// ErrOwnershipChanged reports that a shard's ownership record or the route table was not what
// the migration expected (someone else moved the unit). Before the target opens, it aborts
// the migration; after, the migration stops and needs an operator.
var ErrOwnershipChanged = errors.New("migrate: ownership changed underneath the migration")

// ErrConflict reports a protocol conflict: the target already held an equal version of a
// record with other content, or an op ID with another result. It aborts the migration.
var ErrConflict = errors.New("migrate: protocol conflict")

// ErrVerify reports that the digests of source and target differed after the copy.
var ErrVerify = errors.New("migrate: verification failed")

// ErrGraceNotElapsed reports a Cleanup before the grace period after the flip ended.
var ErrGraceNotElapsed = errors.New("migrate: grace period not elapsed")

// ErrFenced reports that this call lost the right to drive the migration: another driver
// (a Resume after this one's lease expired, a second Migrate, a Cancel) took it over with a
// newer fencing epoch, and the step this call tried was refused by the journal, a shard or
// the table in the same atomic step as its write. Nothing was changed by the refused step;
// the call stops. Errors carry a [*FencedError].
var ErrFenced = errors.New("migrate: driver fenced: another driver took the migration over")

// ErrDriverBusy reports that a Resume gave up (its context ended) while another driver held
// the migration's lease.
var ErrDriverBusy = errors.New("migrate: another driver holds the migration")

// ErrRollbackUnsafe reports a cache-mode rollback after the old copy expired: flipping back
// would send every read of the tenant to a cold source shard.
var ErrRollbackUnsafe = errors.New("migrate: rollback unsafe: the old copy expired")

// BusyError is the typed form of [ErrBusy].
type BusyError struct {
	Unit   string // Unit is the unit asked for.
	Holder string // Holder is the ID of the migration that holds it.
}

// Error implements error.
func (e *BusyError) Error() string {
	return fmt.Sprintf("migrate: %s is already being migrated by %q", e.Unit, e.Holder)
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// ConflictError is the typed form of [ErrConflict]: what the target held and what arrived.
type ConflictError struct {
	Kind     string // Kind is "record" or "op".
	Field    string // Field is the record field or op ID.
	Stored   string // Stored is the target's encoded value.
	Incoming string // Incoming is the copied encoded value.
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("migrate: protocol conflict on %s %q: target holds %q, source sent %q at the same version",
		e.Kind, e.Field, e.Stored, e.Incoming)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// VerifyError is the typed form of [ErrVerify]: the digests of both sides and a few fields
// that differ.
type VerifyError struct {
	Source, Target Digest   // Source and Target are the two sides' digests.
	Differ         []string // Differ lists up to 10 record fields or op IDs that differ.
}

// Error implements error.
func (e *VerifyError) Error() string {
	return fmt.Sprintf("migrate: verification failed: source %v, target %v, differing %q",
		e.Source, e.Target, e.Differ)
}

// Is makes errors.Is(err, ErrVerify) true.
func (e *VerifyError) Is(target error) bool { return target == ErrVerify }

// invalidf returns an error wrapping ErrInvalid, "migrate: invalid input: " + the message,
// which names the field and the allowed range.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// invalidError is an option error whose message is its own ("migrate: Options.X must be
// …, got …", without invalidf's "invalid input: "), tied to ErrInvalid by Unwrap.
type invalidError struct{ msg string }

// Error implements error.
func (e *invalidError) Error() string { return e.msg }

// Unwrap returns ErrInvalid.
func (e *invalidError) Unwrap() error { return ErrInvalid }

// invalidOption returns an *invalidError with the formatted message, which starts with
// "migrate: " and names the field and the allowed range.
func invalidOption(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// FencedError is the typed form of [ErrFenced].
type FencedError struct {
	ID      string // ID is the migration.
	Epoch   uint64 // Epoch is this driver's fencing epoch.
	Current uint64 // Current is the newer epoch that refused it (0 if unknown).
	Where   string // Where names what refused the step: "journal", "lease", "table" or a shard.
	State   State  // State is the migration's journal state when the driver stopped ("" if unknown).
}

// Error implements error.
func (e *FencedError) Error() string {
	return fmt.Sprintf("migrate: driver of migration %q at epoch %d was fenced by epoch %d (%s): another driver took it over",
		e.ID, e.Epoch, e.Current, e.Where)
}

// Is makes errors.Is(err, ErrFenced) true, and errors.Is(err, ErrCancelled) when the
// migration was taken over by a Cancel.
func (e *FencedError) Is(target error) bool {
	return target == ErrFenced || target == ErrCancelled && (e.State == Cancelling || e.State == Cancelled)
}
