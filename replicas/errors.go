package replicas

import (
	"github.com/celebrity-go/celebrity/internal/errs"

	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotFound is returned by Get when no copy and not the logical key hold a value (the
	// key is missing, expired or deleted).
	ErrNotFound = errs.ErrNotFound
	// ErrStaleVersion is returned by Set and Delete when the logical key already holds a
	// newer version (or a tombstone of the same version): the write changed nothing.
	ErrStaleVersion = errors.New("replicas: a newer version is stored")
	// ErrCorrupt is returned when a key holds a value this package did not write.
	ErrCorrupt = errors.New("replicas: stored value has an unknown format")
	// ErrClosed is returned by GetOrLoad after Close.
	ErrClosed = errors.New("replicas: replicator closed")
)

// PrimaryIndex is the CopyError.Index of the logical key itself.
const PrimaryIndex = -1

// CopyError is one failed write of a Set or Delete.
type CopyError struct {
	// Index is the copy's position in this instance's layout, or PrimaryIndex for the
	// logical key. Copies registered by other instances only have Index -2.
	Index int
	// Key is the physical key that was not written.
	Key string
	// Err is why.
	Err error
}

// PartialWriteError is returned by Set and Delete when some physical keys took the write
// and others did not (or may not have: a lost reply is reported as a failure). The keys
// that took it hold the new version; the failed ones may keep an older version until they
// are written again or expire. Written counts the keys that took the write.
type PartialWriteError struct {
	Key     string
	Written int
	Failed  []CopyError
}

// Error lists the failed physical keys.
func (e *PartialWriteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "replicas: write of %q reached %d of %d physical keys; failed:", e.Key, e.Written, e.Written+len(e.Failed))
	for _, f := range e.Failed {
		fmt.Fprintf(&b, " %s (%v);", f.Key, f.Err)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Unwrap returns the errors of the failed writes.
func (e *PartialWriteError) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f.Err
	}
	return out
}
