package replicas

import (
	"strconv"
	"strings"
)

// Every record the package stores, at the primary key and at each copy, is one Redis string:
//
//	c2,<version>,<kind>,<expiry>,<registry>,<data>
//
// version is the host's version in decimal; kind is "v" for a value and "x" for a
// tombstone; expiry is when the value (or tombstone) ends, in Unix ms of the server that
// wrote the primary record, or 0 for a key never replicated (its key's own TTL ends it);
// registry is empty except at the primary key of a replicated
// key, where it lists the copies writers must keep up to date ("<slot>:<expiry ms>" entries
// joined by "."); data is the host's bytes, untouched. The key itself lives at least until
// its value's expiry and, at the primary, until its last registration's: after the value
// expires the record stays as a version floor that refuses older writes (a "ghost") while a
// copy registered there may live. The scripts in this package parse the same format.

const magic = "c2,"

// Kinds of stored records.
const (
	kindValue     = "v"
	kindTombstone = "x"
)

// regEntry is one registered copy: its slot and when its registration ends (server ms).
type regEntry struct {
	slot   uint16
	expiry int64
}

// record is a decoded stored value.
type record struct {
	version   uint64
	tombstone bool
	expiry    int64 // Unix ms; 0 in a record not yet written
	reg       []regEntry
	data      string
	none      bool // no record is stored (set by setPrimary, never by decode)
}

// live reports whether rec's value or tombstone has not expired at nowMs. Expiry 0 (a key
// never replicated) means the key's own TTL ends it: a record read is live.
func (rec record) live(nowMs int64) bool { return rec.expiry == 0 || rec.expiry > nowMs }

// decode parses a stored value. ok is false when raw was not written by this package.
func decode(raw string) (rec record, ok bool) {
	rest, found := strings.CutPrefix(raw, magic)
	if !found {
		return rec, false
	}
	v, rest, found := strings.Cut(rest, ",")
	if !found {
		return rec, false
	}
	version, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return rec, false
	}
	kind, rest, found := strings.Cut(rest, ",")
	if !found || (kind != kindValue && kind != kindTombstone) {
		return rec, false
	}
	e, rest, found := strings.Cut(rest, ",")
	if !found {
		return rec, false
	}
	expiry, err := strconv.ParseInt(e, 10, 64)
	if err != nil {
		return rec, false
	}
	reg, data, found := strings.Cut(rest, ",")
	if !found {
		return rec, false
	}
	rec = record{version: version, tombstone: kind == kindTombstone, expiry: expiry, data: data}
	rec.reg, ok = decodeReg(reg)
	return rec, ok
}

// decodeReg parses a record's registry ("<slot>:<expiry ms>" entries joined by "."; empty
// for none). ok is false when reg is malformed; the entries before the bad one are returned.
func decodeReg(reg string) (out []regEntry, ok bool) {
	if reg == "" {
		return nil, true
	}
	for part := range strings.SplitSeq(reg, ".") {
		s, x, found := strings.Cut(part, ":")
		sv, err1 := strconv.ParseUint(s, 10, 16)
		xv, err2 := strconv.ParseInt(x, 10, 64)
		if !found || err1 != nil || err2 != nil {
			return out, false
		}
		out = append(out, regEntry{slot: uint16(sv), expiry: xv})
	}
	return out, true
}
