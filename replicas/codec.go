package replicas

import (
	"strconv"
	"strings"
)

// Every value the package stores, at the logical key and at each copy, is one Redis string:
//
//	c1,<version>,<kind>,<registry>,<data>
//
// version is the host's version in decimal; kind is "v" for a value and "x" for a
// tombstone; registry is empty except at the logical key of a replicated key, where it lists
// the copies that writers must keep up to date ("<slot>:<expiry ms>" entries joined by ".");
// data is the host's bytes, untouched. The scripts in this package parse the same format.

const magic = "c1,"

// Kinds of stored records.
const (
	kindValue     = "v"
	kindTombstone = "x"
)

// record is a decoded stored value.
type record struct {
	version   uint64
	tombstone bool
	data      string
}

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
	_, data, found := strings.Cut(rest, ",")
	if !found {
		return rec, false
	}
	return record{version: version, tombstone: kind == kindTombstone, data: data}, true
}
