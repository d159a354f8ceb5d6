package hotkeys

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by every error for bad input: a bad Options field given to New
	// and a bad argument at run time (k <= 0, a nil client). The error names the field or
	// argument and the allowed range.
	ErrInvalid = errors.New("hotkeys: invalid argument")
	// ErrNoShards is returned by ShardView when Options.Shard is not set.
	ErrNoShards = errors.New("hotkeys: no shard attribution (Options.Shard is nil)")
	// ErrUnsupported is wrapped when the server offers no view of its hot keys.
	ErrUnsupported = errors.New("hotkeys: server-side hot key view unsupported")
)

// UnsupportedError says why a server cannot report key frequencies. It wraps
// ErrUnsupported.
type UnsupportedError struct {
	// Node is the address of the server that lacks the capability.
	Node string
	// Policy is its maxmemory-policy, when known.
	Policy string
	// Reason explains what is missing.
	Reason string
}

// Error implements error.
func (e *UnsupportedError) Error() string {
	if e.Policy != "" {
		return fmt.Sprintf("hotkeys: server-side hot key view unsupported on %s: %s (maxmemory-policy is %q)", e.Node, e.Reason, e.Policy)
	}
	return fmt.Sprintf("hotkeys: server-side hot key view unsupported on %s: %s", e.Node, e.Reason)
}

// Unwrap returns ErrUnsupported.
func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }
