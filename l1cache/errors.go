package l1cache

import (
	"github.com/celebrity-go/celebrity/internal/errs"

	"errors"
	"fmt"
)

// ErrNotFound is returned by a loader to report that the key has no value at the source. The
// cache remembers the absence for Options.NegativeTTL and returns the loader's error (which
// must match ErrNotFound with errors.Is) to every Get of the key in that time.
var ErrNotFound = errs.ErrNotFound

// ErrInvalid is matched, with errors.Is, by every error about bad input: an [Options] or
// [InvalidatorOptions] field out of range, a nil loader, client or target. The message names
// the field and the allowed range; nothing was created.
var ErrInvalid = errors.New("l1cache: invalid argument")

// invalidError is a bad-input error: its message names the field and the allowed range, and
// it matches ErrInvalid.
type invalidError struct{ msg string }

// Error implements error.
func (e *invalidError) Error() string { return e.msg }

// Is reports whether target is ErrInvalid.
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// invalidf returns an error matching ErrInvalid with the message "l1cache: " + format.
func invalidf(format string, args ...any) error {
	return &invalidError{msg: "l1cache: " + fmt.Sprintf(format, args...)}
}

// ErrClosed is returned by a Get that needs a load after [Cache.Close].
var ErrClosed = errors.New("l1cache: cache closed")

// ErrLoaderPanic matches, with errors.Is, the [*PanicError] that replaces a loader's panic.
var ErrLoaderPanic = errors.New("l1cache: loader panicked")

// PanicError is the error every waiter of a load receives when the loader panics. The panic
// is recovered in the load's goroutine, so it never crashes the process and never leaves the
// key's load in flight; it is then handled as any load error (cached for Options.ErrorTTL,
// last good value served within Options.StaleIfError).
type PanicError struct {
	// Key is the key whose loader panicked.
	Key string
	// Value is the value passed to panic.
	Value any
	// Stack is the stack trace of the panicking goroutine.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string {
	return fmt.Sprintf("l1cache: loader panicked for key %q: %v", e.Key, e.Value)
}

// Is reports whether target is ErrLoaderPanic.
func (e *PanicError) Is(target error) bool { return target == ErrLoaderPanic }
