package stripes

import (
	"math/bits"
	"strconv"
	"sync"

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

// checksSplit reports whether the addition of record m is one of the sampled ones that check
// their dedup set's size for a split (add.lua's ARGV[9], addfast.lua's ARGV[6]): the record's 9th and 8th decimal
// digits from the right, as a number, below 6400/setMembers. About one addition in
// setMembers/64 checks.
func checksSplit(m uint64, setMembers int) bool {
	return m/10_000_000%100*uint64(setMembers) < 6400
}

// route is where one event goes inside one generation.
type route struct {
	hash   uint64
	record uint64
	member string
}

func newRoute(id string, dedupBits int) route {
	h := hashing.Sum64(id)
	m := memberOf(h, dedupBits)
	return route{hash: h, record: m, member: strconv.FormatUint(m, 10)}
}

// dedupView is what a Counter last learned of the dedup table of one stripe's slice (see
// add.lua): the slice and the table's level and split pointer. A view may be stale (another
// process split a set since); addfast.lua compares it with the stored state in the same step
// as it uses it, and when they differ uses the stored state and teaches it.
type dedupView struct {
	slice        int64
	level, split uint64
}

// bucket returns the dedup set of a record with selector s under the view.
func (v dedupView) bucket(s uint64) uint64 {
	b := s % (1 << v.level)
	if b < v.split {
		b = s % (1 << (v.level + 1))
	}
	return b
}

// setKey names dedup set b of a slice of a stripe (see add.lua).
func setKey(stripe string, slice int64, b uint64) string {
	return stripe + ":e:" + strconv.FormatInt(slice, 10) + ":" + strconv.FormatUint(b, 10)
}

// state returns the view as add.lua stores it after the slice, "<L>:<p>".
func (v dedupView) state() string {
	return strconv.FormatUint(v.level, 10) + ":" + strconv.FormatUint(v.split, 10)
}

// stripeRef names one stripe of one generation.
type stripeRef struct {
	gen uint64
	i   int
}

// maxViews bounds the views a Counter keeps; past it they are all forgotten and relearned,
// one full add.lua path per stripe.
const maxViews = 4 * MaxStripes

// dedupViews holds a Counter's views, one per stripe: the latest slice it wrote to.
type dedupViews struct {
	mu sync.Mutex
	m  map[stripeRef]dedupView
}

func (d *dedupViews) get(s stripeRef) (dedupView, bool) {
	d.mu.Lock()
	v, ok := d.m[s]
	d.mu.Unlock()
	return v, ok
}

func (d *dedupViews) drop(s stripeRef) {
	d.mu.Lock()
	delete(d.m, s)
	d.mu.Unlock()
}

func (d *dedupViews) put(s stripeRef, v dedupView) {
	d.mu.Lock()
	if old, ok := d.m[s]; !ok || old.slice <= v.slice {
		if d.m == nil || len(d.m) >= maxViews {
			d.m = make(map[stripeRef]dedupView)
		}
		d.m[s] = v
	}
	d.mu.Unlock()
}
