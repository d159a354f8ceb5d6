package celebrity

import (
	"errors"
	"fmt"
	"time"

	"github.com/celebrity-go/celebrity/internal/errs"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

var (
	// ErrNotFound reports a key without value. It is the same value as l1cache.ErrNotFound and
	// replicas.ErrNotFound, so errors.Is matches a miss whichever layer reported it. A Loader
	// returns it (or an error wrapping it) for a key its source does not have.
	ErrNotFound = errs.ErrNotFound
	// ErrInvalid is wrapped by every error about a bad option or argument: the message names
	// the field and the allowed range. Nothing was applied.
	ErrInvalid = errors.New("celebrity: invalid argument")
	// ErrCodec is wrapped by errors of the Codec (encoding a Set's value, decoding a stored
	// one). A Set whose value does not encode writes nothing.
	ErrCodec = errors.New("celebrity: codec error")
	// ErrStaleVersion is returned (wrapped) by Set and Delete when Redis already holds a newer
	// version of the key; nothing was written. It is replicas.ErrStaleVersion.
	ErrStaleVersion = replicas.ErrStaleVersion
	// ErrConflict is returned (wrapped) by Set and Delete when Redis holds other content
	// (other bytes, or a value where a tombstone is, or the reverse) under the same version:
	// nothing was written, and a retry with that version can never succeed; the fleet serves
	// the content stored. Two writers gave one version to two contents: write a newer one.
	// It is replicas.ErrConflict.
	ErrConflict = replicas.ErrConflict
	// ErrIncomplete matches every *WriteError: a Set or Delete that did not carry out every
	// step of the safe order.
	ErrIncomplete = errors.New("celebrity: write incomplete")
	// ErrLoaderPanic matches the *PanicError that replaces a Loader's panic.
	ErrLoaderPanic = l1cache.ErrLoaderPanic
	// ErrClosed is returned by calls that need Redis or the loader after Close.
	ErrClosed = errors.New("celebrity: cache closed")
)

// PanicError is the error every waiter of a load receives when the Loader panics. The panic
// is recovered, so it never crashes the process (the loader may run on a replicas fetch
// goroutine) and never leaves the key stuck.
type PanicError = l1cache.PanicError

// Step names a step of the safe write order carried out by Set and Delete.
type Step int

const (
	// StepStore is the write of the logical key in Redis, the commit point. When it fails
	// its outcome is unknown: the command may have run with its reply lost (Redis then holds
	// the new version, and a fresh read returns it) or not (Redis holds the version stored
	// before, which the fleet serves until that expires). The invalidation is still sent, so
	// instances drop their entries and read what Redis holds; this instance's entry is not
	// replaced. A retry with the same version completes the write either way.
	StepStore Step = iota + 1
	// StepCopies is the write of the copies of a hot key. The logical key holds the new
	// version; the copies named in the cause may serve the older one until the next write
	// reaches them or they expire (Options.TTL), and instances that load from such a copy
	// keep it for up to Fresh+Stale more. The later steps were carried out.
	StepCopies
	// StepInvalidate is the fleet invalidation (pub/sub). Redis holds the new version and this
	// instance serves it; other instances may serve their cached older version until it
	// leaves its Fresh window and one refresh completes (at most Fresh+Stale after the write).
	StepInvalidate
)

// String returns the step's name.
func (s Step) String() string {
	switch s {
	case StepStore:
		return "store"
	case StepCopies:
		return "copies"
	case StepInvalidate:
		return "invalidate"
	}
	return fmt.Sprintf("Step(%d)", int(s))
}

// WriteError is returned by Set and Delete when a step of the safe order did not complete.
// Step says which one; MayServeOlderFor bounds how long the fleet may still serve an older
// version (TTL+Fresh+Stale for StepStore and StepCopies: an older version stored in Redis
// lives until its TTL ends, and instances keep it for Fresh+Stale more; Fresh+Stale for
// StepInvalidate). Retrying the same call with the same version is safe and completes the
// write: every step is idempotent.
type WriteError struct {
	// Op is "Set" or "Delete".
	Op string
	// Key and Version are the call's.
	Key     string
	Version uint64
	// Step is the first step that did not complete.
	Step Step
	// MayServeOlderFor bounds how long after the call returned any instance may still serve
	// a version older than Version, unless the call is retried successfully first.
	MayServeOlderFor time.Duration
	// Err is the step's error (a *replicas.PartialWriteError for StepCopies).
	Err error
}

// Error describes the failed step and what the fleet may serve meanwhile.
func (e *WriteError) Error() string {
	var meanwhile string
	switch e.Step {
	case StepStore:
		meanwhile = fmt.Sprintf("outcome unknown: Redis may hold this version already (the write ran, its reply was lost) "+
			"or still the one before, which instances may serve for up to %s; a retry with the same version completes the write", e.MayServeOlderFor)
	default:
		meanwhile = fmt.Sprintf("other instances may serve an older version for up to %s", e.MayServeOlderFor)
	}
	return fmt.Sprintf("celebrity: %s %q version %d: step %s did not complete (%s): %v",
		e.Op, e.Key, e.Version, e.Step, meanwhile, e.Err)
}

// Is reports whether target is ErrIncomplete.
func (e *WriteError) Is(target error) bool { return target == ErrIncomplete }

// Unwrap returns the step's error.
func (e *WriteError) Unwrap() error { return e.Err }

// invalidf returns an error wrapping ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
