// Package routingfmt is the storage format of routing's units on their shards: the encoded
// records, idempotency records and change-log entries, the Records field of a tenant's key,
// and the keys of a unit. routing writes it; migrate (which copies units between shards) and
// the celebrity CLI (which inspects them) read it. It is internal so that the format can
// change with the scripts that write it, without a break of routing's API.
package routingfmt

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

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

// LogEntry is one entry of a unit's change log. The guarded write script appends exactly one
// entry for every operation it records, in the same script as the change, so the log is an
// exact, ordered account of the unit's writes and idempotency records:
//
//	k  kind: "put", "del" (the record changed) or "noop" (only an op record was written)
//	f  record field (see RecordField)
//	r  the record after the write, encoded (see EncodeRecord); empty for "noop"
//	o  the op record's key in Ops: OpKey(tenant, operation ID) (the bare operation ID in
//	   entries written before op IDs were scoped per tenant)
//	op the idempotency record, encoded (see EncodeOpRecord)
//	x  expiry of the idempotency record, unix milliseconds
//	tx expiry of the tombstone for "del" (unix milliseconds), "0" otherwise
//
// A consumer that applies entries elsewhere (migrate's catch-up) reproduces the script's
// effects: the record if its version is newer, the op record with its expiry in Ops and
// OpExpiry, the tombstone's expiry in Tombstones for "del", and removal from Tombstones for
// "put".
type LogEntry struct {
	ID       string   // ID is the stream entry ID.
	Kind     string   // Kind is "put", "del" or "noop".
	Field    string   // Field is the record field.
	Record   Record   // Record is the record after the write (zero for "noop").
	OpID     string   // OpID is the op record's key in Ops (see OpKey).
	Op       OpRecord // Op is the idempotency record written.
	OpExpiry int64    // OpExpiry is the op record's expiry, unix milliseconds.
	// TombstoneExpiry is the tombstone's expiry for "del", unix milliseconds; 0 otherwise.
	TombstoneExpiry int64
}

// ParseLogEntry decodes one change-log stream message.
func ParseLogEntry(m redis.XMessage) (LogEntry, error) {
	get := func(k string) string {
		v, _ := m.Values[k].(string)
		return v
	}
	e := LogEntry{ID: m.ID, Kind: get("k"), Field: get("f"), OpID: get("o")}
	switch e.Kind {
	case "put", "del":
		r, err := DecodeRecord(get("r"))
		if err != nil {
			return LogEntry{}, fmt.Errorf("routing: log entry %s: %w", m.ID, err)
		}
		e.Record = r
	case "noop":
	default:
		return LogEntry{}, fmt.Errorf("routing: log entry %s: unknown kind %q", m.ID, e.Kind)
	}
	op, err := DecodeOpRecord(get("op"))
	if err != nil {
		return LogEntry{}, fmt.Errorf("routing: log entry %s: %w", m.ID, err)
	}
	e.Op = op
	x, err := strconv.ParseInt(get("x"), 10, 64)
	if err != nil {
		return LogEntry{}, fmt.Errorf("routing: log entry %s: malformed expiry %q", m.ID, get("x"))
	}
	e.OpExpiry = x
	if tx := get("tx"); tx != "" {
		if e.TombstoneExpiry, err = strconv.ParseInt(tx, 10, 64); err != nil {
			return LogEntry{}, fmt.Errorf("routing: log entry %s: malformed tombstone expiry %q", m.ID, tx)
		}
	}
	return e, nil
}

// RecordField returns the field under which a tenant's key is stored in a unit's Records
// hash: the tenant's length, a colon, the tenant, then the key. The length prefix keeps
// tenants apart inside a shared bucket without restricting the characters they use.
func RecordField(tenant, key string) string {
	return strconv.Itoa(len(tenant)) + ":" + tenant + key
}

// SplitRecordField reverses RecordField.
func SplitRecordField(field string) (tenant, key string, ok bool) {
	i := strings.IndexByte(field, ':')
	if i <= 0 {
		return "", "", false
	}
	n, err := strconv.Atoi(field[:i])
	if err != nil || n < 0 || i+1+n > len(field) {
		return "", "", false
	}
	return field[i+1 : i+1+n], field[i+1+n:], true
}

// UnitKeys are the keys of one unit on its shard. They all share the unit's hash tag, so they
// live in one hash slot and one script can touch all of them on a cluster.
type UnitKeys struct {
	Tag        string // Tag is the hash tag including braces, e.g. "{celebrity:routing:b:12}".
	Own        string // Own is the ownership record (HASH gen, state, x:<tenant>).
	Records    string // Records is the record store (HASH field -> encoded Record).
	Ops        string // Ops holds idempotency records (HASH op ID -> encoded OpRecord).
	OpExpiry   string // OpExpiry holds op ID expiry times (ZSET, score unix ms).
	Tombstones string // Tombstones holds tombstone expiry times (ZSET field, score unix ms).
	Log        string // Log is the change log (STREAM).
}

// Keys returns the keys of the unit whose hash tag (braces included) is tag.
func Keys(tag string) UnitKeys {
	return UnitKeys{
		Tag:        tag,
		Own:        tag + ":own",
		Records:    tag + ":rec",
		Ops:        tag + ":ops",
		OpExpiry:   tag + ":opx",
		Tombstones: tag + ":tomb",
		Log:        tag + ":log",
	}
}
