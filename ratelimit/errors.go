package ratelimit

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error about bad options or bad input (a zero or negative
// limit, a zero window, a burst larger than the limit, an empty or oversized key, a request
// cost out of range). The message names the field and the allowed range. Nothing was
// admitted and nothing was written.
var ErrInvalid = errors.New("ratelimit: invalid argument")

// ErrClosed is returned by every call on a [Limiter] after [Limiter.Close].
var ErrClosed = errors.New("ratelimit: closed")

// invalidf returns an error wrapping ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
