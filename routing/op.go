package routing

import (
	"strconv"

	"github.com/celebrity-go/celebrity/internal/hashing"
)

// OpKind is the kind of a write operation.
type OpKind uint8

// The write kinds.
const (
	OpPut    OpKind = iota + 1 // OpPut stores Value under Key.
	OpDelete                   // OpDelete leaves a versioned tombstone under Key.
)

// Op is one write to the versioned record store. Build it with [Put], [PutIf], [Delete]
// or [DeleteIf].
type Op struct {
	Kind  OpKind // Kind is OpPut or OpDelete.
	Key   string // Key is the record key within the tenant; for a spread tenant it also picks the sub-bucket.
	Value string // Value is the value to store (OpPut only).
	// Check makes the write conditional: it applies only if the record's current version
	// equals Version (0 means absent or deleted).
	Check   bool
	Version uint64 // Version is the expected version when Check is set.
}

// Put returns an unconditional write of value under key.
func Put(key, value string) Op { return Op{Kind: OpPut, Key: key, Value: value} }

// PutIf returns a write of value under key that applies only if the record's current
// version is version (0: the key is absent or deleted).
func PutIf(key, value string, version uint64) Op {
	return Op{Kind: OpPut, Key: key, Value: value, Check: true, Version: version}
}

// Delete returns an unconditional delete of key.
func Delete(key string) Op { return Op{Kind: OpDelete, Key: key} }

// DeleteIf returns a delete of key that applies only at the given current version.
func DeleteIf(key string, version uint64) Op {
	return Op{Kind: OpDelete, Key: key, Check: true, Version: version}
}

func (o Op) validate() error {
	switch o.Kind {
	case OpPut:
	case OpDelete:
		if o.Value != "" {
			return errInput("a Delete carries no value")
		}
	default:
		return errInput("unknown op kind " + strconv.Itoa(int(o.Kind)))
	}
	if o.Key == "" {
		return errInput("empty key")
	}
	return nil
}

func (o Op) kindArg() string {
	if o.Kind == OpDelete {
		return "del"
	}
	return "put"
}

// fingerprint identifies the operation an op ID stands for: the same op ID with another
// fingerprint is a conflict. It is xxhash64 over an unambiguous encoding of the tenant, the
// kind, the key, the check and the value, in hex.
func (o Op) fingerprint(tenant string) string {
	b := make([]byte, 0, 32+len(tenant)+len(o.Key)+len(o.Value))
	b = append(b, o.kindArg()...)
	b = strconv.AppendInt(b, int64(len(tenant)), 10)
	b = append(b, ':')
	b = append(b, tenant...)
	b = strconv.AppendInt(b, int64(len(o.Key)), 10)
	b = append(b, ':')
	b = append(b, o.Key...)
	if o.Check {
		b = append(b, 'c')
		b = strconv.AppendUint(b, o.Version, 10)
	}
	b = append(b, '|')
	b = append(b, o.Value...)
	return strconv.FormatUint(hashing.Sum64(string(b)), 16)
}

// Result is the result of a write. A retried operation returns its first result.
type Result struct {
	// Applied is true when the operation changed the record (now or on its first attempt).
	Applied bool
	// Version is the record's version after the write; on a mismatch, the version found;
	// 0 for a Delete of an absent key.
	Version uint64
	// Replayed is true when this reply came from the idempotency record of an earlier
	// attempt of the same operation ID rather than from applying it now.
	Replayed bool
}
