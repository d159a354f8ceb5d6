// Package errs holds the error values that several packages export as their own, so that
// errors.Is matches them whichever layer produced the error.
package errs

import (
	"errors"
	"strings"
)

// ErrNotFound is the one "not found" value: l1cache, replicas and the root package export it
// under their own names, so a caller's errors.Is(err, celebrity.ErrNotFound) holds for a
// miss reported by any layer.
var ErrNotFound = errors.New("celebrity: not found")

// shortLen is how many bytes of a caller's input Short keeps.
const shortLen = 64

// Short returns s for an error message: whole up to 64 bytes, else its first 64 bytes and
// "...", so that a huge bad input does not make a huge error. Quote the result (%q).
func Short(s string) string {
	if len(s) > shortLen {
		return s[:shortLen] + "..."
	}
	return s
}

// NoPerm reports whether err is Redis's refusal of a key or command the client's ACL user
// may not use (a reply starting "NOPERM").
func NoPerm(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOPERM")
}

// KeyRefused reports whether err is Redis's refusal of a key the ACL user may not access
// (NOPERM naming keys), not of a command: a user refused a command cannot tell whether a key
// exists, and a caller must not take the refusal for its absence.
func KeyRefused(err error) bool {
	if !NoPerm(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "key") && !strings.Contains(msg, "command")
}
