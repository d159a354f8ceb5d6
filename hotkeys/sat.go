package hotkeys

import "math/bits"

// addSat returns a+b, or the largest uint64 when the sum does not fit: weights from
// ObserveCost may be as large as the host likes, and a sum that wrapped would report a tiny
// load for the heaviest key.
func addSat(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return ^uint64(0)
	}
	return s
}

// subFloor returns a-b, or 0 when b exceeds a.
func subFloor(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}
