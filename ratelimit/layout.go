package ratelimit

import (
	"strconv"
	"unicode/utf8"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/slot"
)

// itoa formats an integer in decimal.
func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// checkKey validates a limit key: 1..MaxKeyBytes bytes. Any bytes are accepted (':', '{',
// '}', invalid UTF-8): the key is stored verbatim after a hash tag of the package's own,
// so it never changes a slot and two keys never share a Redis key.
func (l *Limiter) checkKey(key string) error {
	if key == "" || len(key) > l.o.MaxKeyBytes {
		q := key
		if len(q) > 32 {
			q = q[:32] + "..."
		}
		if !utf8.ValidString(q) {
			q = "(not UTF-8)"
		}
		return invalidf("key must be 1..%d bytes, got %d (%q)", l.o.MaxKeyBytes, len(key), q)
	}
	return nil
}

// tagIn returns the hash tag of key's slot j of n: a tag whose hash slot lies in the j-th of
// n equal ranges of the 16384 hash slots, at an offset chosen by the key's hash.
func tagIn(key string, j, n int) string {
	lo := j * slot.Count / n
	hi := (j + 1) * slot.Count / n
	h := hashing.Sum64(key)
	return slot.TagFor(uint16(lo + int(h%uint64(hi-lo))))
}

// limitID names a limit in its keys, so that limits on one key (10 per second and 600 per
// minute on one merchant) never share state: "<rate>/<period ms>" followed by the window,
// "g<burst>" (GCRA), "s<sub-windows>" (Sliding) or "f" (Fixed). Digits and letters only, so
// the caller's key, which follows it, cannot make two limits' keys equal.
func (o Options) limitID() string {
	id := itoa(o.Limit.Rate) + "/" + itoa(o.Limit.Period.Milliseconds())
	switch o.Window {
	case GCRA:
		return id + "g" + itoa(o.Limit.Burst)
	case Sliding:
		return id + "s" + strconv.Itoa(o.SubWindows)
	default:
		return id + "f"
	}
}

// gcraKey returns the GCRA key of key.
func (l *Limiter) gcraKey(key string) string {
	return slot.Tagged(l.o.Prefix, tagIn(key, 0, 1)) + ":g:" + l.limit + ":" + key
}

// slotKey returns the base of budget slot j of key (Exact windows and Leased mode).
func (l *Limiter) slotKey(key string, j int) string {
	m := "e:"
	if l.o.Mode == Leased {
		m = "l:"
	}
	return slot.Tagged(l.o.Prefix, tagIn(key, j, l.o.Slots)) + ":" + m + l.limit + ":" + key + ":" + strconv.Itoa(j)
}

// syncKey returns the base of key's shared counts in Approximate mode.
func (l *Limiter) syncKey(key string) string {
	return slot.Tagged(l.o.Prefix, tagIn(key, 0, 1)) + ":a:" + l.limit + ":" + key
}
