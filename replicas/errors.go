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
	// newer version (live, or expired less than its last copy registration ago): the write
	// changed nothing.
	ErrStaleVersion = errors.New("replicas: a newer version is stored")
	// ErrConflict is returned by Set and Delete when the logical key holds the same version
	// with other content (other bytes, or a value where a tombstone is written, or the
	// reverse): versions must name one content, so this is a protocol error or corruption,
	// not a repeat. The write changed nothing. A retry with identical content is a no-op
	// that returns nil.
	ErrConflict = errors.New("replicas: the same version is stored with other content")
	// ErrInvalid is wrapped by every error about a bad option or argument.
	ErrInvalid = errors.New("replicas: invalid argument")
	// ErrLoadFailed is wrapped by the error GetOrLoad returns when a load failed, on this
	// instance or, within Options.ErrorTTL, on another (then only the error's text is known).
	ErrLoadFailed = errors.New("replicas: load failed")
	// ErrNotReplicated is wrapped by a write's error when Options.WaitReplicas replicas did
	// not acknowledge it within Options.WaitTimeout: it applied on the master, and a failover
	// before the replicas copy it can lose it.
	ErrNotReplicated = errors.New("replicas: write not acknowledged by the replicas")
	// ErrCorrupt is returned when a key holds a value this package did not write.
	ErrCorrupt = errors.New("replicas: stored value has an unknown format")
	// ErrPrefixMismatch is returned by New when Options.FleetKey names a fleet whose live
	// instances use another Options.Prefix: instances with different prefixes are separate
	// caches that never see each other's writes, so one fleet must not mix them.
	ErrPrefixMismatch = errors.New("replicas: the fleet's live instances use another prefix")
	// ErrClosed is returned by GetOrLoad after Close.
	ErrClosed = errors.New("replicas: replicator closed")
)

// Values of CopyError.Index that are not a position in this instance's layout.
const (
	// PrimaryIndex is the CopyError.Index of the logical key itself.
	PrimaryIndex = -1
	// ForeignIndex is the CopyError.Index of a copy that another instance registered: it has
	// no position in this instance's layout.
	ForeignIndex = -2
)

// CopyError is one failed write of a Set or Delete.
type CopyError struct {
	// Index is the copy's position in this instance's layout, or PrimaryIndex for the
	// logical key. Copies registered by other instances only have ForeignIndex.
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
