package celebritytest_test

import "testing"

// The package example's host test runs and passes against real servers.
func TestTheExampleHoldsForItsCode(t *testing.T) { checkIncrOnce(t) }
