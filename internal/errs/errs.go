// Package errs holds the error values that several packages export as their own, so that
// errors.Is matches them whichever layer produced the error.
package errs

import "errors"

// ErrNotFound is the one "not found" value: l1cache, replicas and the root package export it
// under their own names, so a caller's errors.Is(err, celebrity.ErrNotFound) holds for a
// miss reported by any layer.
var ErrNotFound = errors.New("celebrity: not found")
