package routing

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/celebrity-go/celebrity/internal/errs"
)

// Record is one versioned record as stored in a unit's Records hash, encoded as
// "<version>:l:<value>" (live) or "<version>:t:" (tombstone).
//
// Versions start at 1 and grow by one with every Put or Delete of the field, across
// deletes: a Put after a tombstone at version 5 writes version 6, so a late copy of an older
// version can always be recognised and refused.
type Record struct {
	Version uint64 // Version is the record's version, >= 1 for a stored record.
	Deleted bool   // Deleted marks a tombstone.
	Value   string // Value is the stored value; empty for tombstones.
}

// EncodeRecord returns the stored form of r.
func EncodeRecord(r Record) string {
	if r.Deleted {
		return strconv.FormatUint(r.Version, 10) + ":t:"
	}
	return strconv.FormatUint(r.Version, 10) + ":l:" + r.Value
}

// DecodeRecord parses the stored form of a record.
func DecodeRecord(s string) (Record, error) {
	i := strings.IndexByte(s, ':')
	if i <= 0 || len(s) < i+3 || s[i+2] != ':' {
		return Record{}, fmt.Errorf("routing: malformed record %q", errs.Short(s))
	}
	v, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil || v == 0 {
		return Record{}, fmt.Errorf("routing: malformed record version in %q", errs.Short(s))
	}
	switch s[i+1] {
	case 'l':
		return Record{Version: v, Value: s[i+3:]}, nil
	case 't':
		return Record{Version: v, Deleted: true}, nil
	}
	return Record{}, fmt.Errorf("routing: malformed record flag in %q", errs.Short(s))
}

// Outcome is the recorded outcome of a write operation.
type Outcome string

// The outcomes a write can record under its operation ID.
const (
	OutcomeApplied  Outcome = "ok"       // OutcomeApplied: the Put or Delete changed the record.
	OutcomeMismatch Outcome = "mismatch" // OutcomeMismatch: the version check failed; nothing changed.
	OutcomeAbsent   Outcome = "absent"   // OutcomeAbsent: Delete of an absent or deleted key; nothing changed.
)

// OpRecord is an idempotency record as stored in a unit's Ops hash, encoded as
// "<fingerprint>:<outcome>:<version>:<field>". Version is the record version after an
// applied write, or the version found on a mismatch. Field names the record the operation
// addressed, and through it the tenant (see SplitRecordField), so a tenant's op records can
// be told apart inside a shared bucket.
type OpRecord struct {
	Fingerprint string  // Fingerprint identifies the operation (tenant, kind, key, check, value).
	Outcome     Outcome // Outcome is the first result of the operation.
	Version     uint64  // Version is the version written, or found on a mismatch.
	Field       string  // Field is the record field the operation addressed.
}

// EncodeOpRecord returns the stored form of r.
func EncodeOpRecord(r OpRecord) string {
	return r.Fingerprint + ":" + string(r.Outcome) + ":" + strconv.FormatUint(r.Version, 10) + ":" + r.Field
}

// DecodeOpRecord parses the stored form of an idempotency record.
func DecodeOpRecord(s string) (OpRecord, error) {
	parts := strings.SplitN(s, ":", 4)
	if len(parts) != 4 || parts[0] == "" {
		return OpRecord{}, fmt.Errorf("routing: malformed op record %q", errs.Short(s))
	}
	v, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil {
		return OpRecord{}, fmt.Errorf("routing: malformed op record version in %q", errs.Short(s))
	}
	switch o := Outcome(parts[1]); o {
	case OutcomeApplied, OutcomeMismatch, OutcomeAbsent:
		return OpRecord{Fingerprint: parts[0], Outcome: o, Version: v, Field: parts[3]}, nil
	}
	return OpRecord{}, fmt.Errorf("routing: malformed op record outcome in %q", errs.Short(s))
}
