package stripes

import (
	"errors"
	"fmt"
)

// ErrTooOld is returned by [Counter.Add] when an event can no longer be deduplicated: its
// generation was sealed (its total folded into the base value), or its time lies more than
// DedupWindow behind the clock of the Redis server holding its stripe (see [Event] for the
// two slices of leeway). Nothing was written.
// A caller that gets ErrTooOld for a retry may assume the first attempt either counted or
// never will.
var ErrTooOld = errors.New("stripes: event is older than the dedup window")

// ErrInvalid is wrapped by every error about bad options or bad input (an empty or
// oversized ID, a zero delta, a zero time, a stripe count out of range, a delta that would
// overflow its stripe's int64 value). Nothing was written, and nothing was remembered: an
// unchanged retry gets the same error.
var ErrInvalid = errors.New("stripes: invalid argument")

// ErrUnknownGeneration is returned when an event names a generation that the layout does
// not hold (or that is still being opened). Nothing was written.
var ErrUnknownGeneration = errors.New("stripes: generation does not exist")

// ErrLayout is returned when Redis state contradicts the layout record: a stripe key of a
// live generation is missing or belongs to another generation. It usually means data loss
// (a restart without persistence, a FLUSHALL, a failover that lost writes).
var ErrLayout = errors.New("stripes: stored state contradicts the layout")

// ErrVanished is returned when state this counter had (its layout record, a stripe of a
// live generation) is gone from Redis: a FLUSHALL, a restart without persistence, a
// failover that lost writes, an eviction. The counter refuses to recreate it, because a
// recreated counter would silently restart from zero (or from a part of its stripes).
// errors.Is(err, ErrLayout) also holds. See "What is detected" in the package doc.
var ErrVanished error = &vanishedError{}

// vanishedError is the type of ErrVanished: a kind of ErrLayout, tied to it by Is.
type vanishedError struct{}

func (*vanishedError) Error() string { return "stripes: stored state vanished" }

// Is reports whether target is ErrLayout, the sentinel ErrVanished is a kind of.
func (*vanishedError) Is(target error) bool { return target == ErrLayout }

// vanishedf returns an error wrapping ErrVanished.
func vanishedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrVanished}, args...)...)
}

// ErrConflict is returned by [Counter.Resize] when concurrent layout changes kept its
// compare-and-set from succeeding within its attempt budget. Retrying is safe.
var ErrConflict = errors.New("stripes: layout changed concurrently")

// ErrClosed is returned by a [Reader] after Close.
var ErrClosed = errors.New("stripes: closed")

// invalidf returns an error wrapping ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
