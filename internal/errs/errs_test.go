package errs

import (
	"errors"
	"fmt"
	"testing"
)

// A refused key reads as absent to the previous-prefix checks; a refused command must not:
// the replies of Redis 7.0 and 7.2+ (Valkey's are 7.2's).
func TestKeyRefusedTellsKeysFromCommands(t *testing.T) {
	for _, tc := range []struct {
		err       error
		noPerm    bool
		keyRefuse bool
	}{
		{errors.New("NOPERM this user has no permissions to access one of the keys used as arguments"), true, true},
		{errors.New("NOPERM No permissions to access a key"), true, true},
		{fmt.Errorf("escrow: read: %w", errors.New("NOPERM No permissions to access a key")), false, false},
		{errors.New("NOPERM this user has no permissions to run the 'exists' command"), true, false},
		{errors.New("NOPERM User lim has no permissions to run the 'hget' command"), true, false},
		{errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), false, false},
		{nil, false, false},
	} {
		if got := NoPerm(tc.err); got != tc.noPerm {
			t.Errorf("NoPerm(%v) = %v", tc.err, got)
		}
		if got := KeyRefused(tc.err); got != tc.keyRefuse {
			t.Errorf("KeyRefused(%v) = %v", tc.err, got)
		}
	}
}
