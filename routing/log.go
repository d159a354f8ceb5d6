package routing

import (
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

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
