package stripes

import (
	"math/bits"
	"strconv"

	"github.com/celebrity-go/celebrity/internal/hashing"
)

// splitMarker is the set member that marks a dedup set whose members were moved one level
// deeper (see add.lua). Event members are never 0: memberOf maps 0 to 1.
const splitMarker = "0"

// selectorBits is how many low bits of a member choose its dedup set (add.lua computes the
// same value from the member's decimal digits).
const selectorBits = 24

// stripeOf returns the stripe of an event ID in a generation of n stripes: the project's
// hash contract, xxhash64(ID) % n.
func stripeOf(h uint64, n int) int {
	return int(h % uint64(n))
}

// memberOf returns the dedup record of an event whose ID hashes to h: the hash rotated by 32
// bits (so that the record's low bits, which choose its dedup set, are independent of the
// low bits that choose its stripe) and truncated to dedupBits bits. Records fit intset
// encoding: 63 bits as int64, 31 bits as int32.
func memberOf(h uint64, dedupBits int) uint64 {
	m := bits.RotateLeft64(h, 32) & (uint64(1)<<dedupBits - 1)
	if m == 0 {
		m = 1
	}
	return m
}

// selectorOf returns the low selectorBits bits of a member, the value add.lua derives from
// the member's decimal digits.
func selectorOf(m uint64) uint64 {
	return m & (1<<selectorBits - 1)
}

// route is where one event goes inside one generation.
type route struct {
	hash   uint64
	member string
}

func newRoute(id string, dedupBits int) route {
	h := hashing.Sum64(id)
	return route{hash: h, member: strconv.FormatUint(memberOf(h, dedupBits), 10)}
}
