package stripes

import (
	"math/bits"
	"strconv"

	"github.com/celebrity-go/celebrity/internal/hashing"
)

// bucketMarker is the member every dedup set is created with (see add.lua), so that the set
// exists, with its expiry, before its first record. Event members are never 0: memberOf maps
// 0 to 1.
const bucketMarker = "0"

// stripeOf returns the stripe of an event ID in a generation of n stripes: the project's
// hash contract, xxhash64(ID) % n.
func stripeOf(h uint64, n int) int {
	return int(h % uint64(n))
}

// memberOf returns the dedup record of an event whose ID hashes to h: the hash rotated by 32
// bits (so that the record's last decimal digits, which choose its dedup set, do not follow
// the low bits that choose its stripe) and truncated to dedupBits bits. Records fit intset
// encoding: 63 bits as int64, 31 bits as int32.
func memberOf(h uint64, dedupBits int) uint64 {
	m := bits.RotateLeft64(h, 32) & (uint64(1)<<dedupBits - 1)
	if m == 0 {
		m = 1
	}
	return m
}

// selectorOf returns the value add.lua derives from a member's last 7 decimal digits to
// choose its dedup set.
func selectorOf(m uint64) uint64 {
	return m % 10_000_000
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
