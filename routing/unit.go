package routing

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/slot"
)

// UnitKind says how a tenant was placed: by hash bucket, by override or by spread.
type UnitKind uint8

// The unit kinds. Each unit has its own ownership record, records, idempotency records and
// change log on the shard that owns it.
const (
	// KindBucket is one of the table's B hash buckets; it holds every tenant that hashes to
	// it and has neither an override nor a spread.
	KindBucket UnitKind = iota + 1
	// KindTenant is a tenant placed by an override: the tenant alone is the unit.
	KindTenant
	// KindSpread is sub-bucket Sub of a spread tenant.
	KindSpread
)

// String returns "bucket", "tenant" or "spread".
func (k UnitKind) String() string {
	switch k {
	case KindBucket:
		return "bucket"
	case KindTenant:
		return "tenant"
	case KindSpread:
		return "spread"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Unit is a placement unit: the smallest thing a route table assigns to a shard and that
// migrate moves. A Unit is a comparable value and can be a map key.
type Unit struct {
	Kind   UnitKind // Kind is how the unit was placed.
	Bucket uint32   // Bucket is the hash bucket (KindBucket only).
	Tenant string   // Tenant is the tenant (KindTenant and KindSpread only).
	Sub    uint32   // Sub is the sub-bucket index (KindSpread only).
}

// BucketUnit returns the unit of hash bucket b.
func BucketUnit(b uint32) Unit { return Unit{Kind: KindBucket, Bucket: b} }

// TenantUnit returns the unit of an overridden tenant.
func TenantUnit(tenant string) Unit { return Unit{Kind: KindTenant, Tenant: tenant} }

// SpreadUnit returns sub-bucket sub of a spread tenant.
func SpreadUnit(tenant string, sub uint32) Unit {
	return Unit{Kind: KindSpread, Tenant: tenant, Sub: sub}
}

// String returns a readable form such as "bucket 12", "tenant \"acme\"" or
// "spread \"acme\"/3".
func (u Unit) String() string {
	switch u.Kind {
	case KindBucket:
		return "bucket " + strconv.FormatUint(uint64(u.Bucket), 10)
	case KindTenant:
		return "tenant " + strconv.Quote(u.Tenant)
	case KindSpread:
		return "spread " + strconv.Quote(u.Tenant) + "/" + strconv.FormatUint(uint64(u.Sub), 10)
	}
	return "unit(" + u.Kind.String() + ")"
}

// Validate reports whether u is well formed.
func (u Unit) Validate() error {
	switch u.Kind {
	case KindBucket:
		if u.Tenant != "" || u.Sub != 0 {
			return fmt.Errorf("%w: bucket unit carries a tenant or sub-bucket", ErrInvalid)
		}
	case KindTenant:
		if u.Tenant == "" || u.Sub != 0 {
			return fmt.Errorf("%w: tenant unit needs a tenant and no sub-bucket", ErrInvalid)
		}
		if p := tenantProblem(u.Tenant); p != "" {
			return fmt.Errorf("%w: %s", ErrInvalid, p)
		}
	case KindSpread:
		if u.Tenant == "" {
			return fmt.Errorf("%w: spread unit needs a tenant", ErrInvalid)
		}
		if p := tenantProblem(u.Tenant); p != "" {
			return fmt.Errorf("%w: %s", ErrInvalid, p)
		}
	default:
		return fmt.Errorf("%w: unknown unit kind %d", ErrInvalid, u.Kind)
	}
	return nil
}

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "celebrity:routing:"

// Keys computes the Redis key layout under one prefix. The zero value uses DefaultPrefix.
// See the package documentation for the layout.
type Keys struct {
	// Prefix is the key prefix; it must not contain '{' or '}'. It is joined to each name
	// with ':' ("app" names app:table, "app:" app::table), except DefaultPrefix, which ends
	// in its ':' and names the keys "celebrity:routing" named before v0.2.0 (and still
	// does). Default: DefaultPrefix.
	Prefix string
}

// prefix returns the start of every name (see Keys.Prefix).
func (k Keys) prefix() string { return namesStart(k.Prefix) }

// namesStart returns the start of every name under prefix p: p and ':', or DefaultPrefix
// for "" and DefaultPrefix itself. No key moves from a version before v0.2.0, whose default
// "celebrity:routing" was joined with ':' as every other prefix still is.
func namesStart(p string) string {
	if p == "" || p == DefaultPrefix {
		return DefaultPrefix
	}
	return p + ":"
}

// Tag returns the hash tag of unit u, braces included.
func (k Keys) Tag(u Unit) string {
	var b strings.Builder
	b.WriteByte('{')
	b.WriteString(k.prefix())
	switch u.Kind {
	case KindBucket:
		b.WriteString("b:")
		b.WriteString(strconv.FormatUint(uint64(u.Bucket), 10))
	case KindTenant:
		b.WriteString("t:")
		escapeTag(&b, u.Tenant)
	case KindSpread:
		b.WriteString("s:")
		b.WriteString(strconv.FormatUint(uint64(u.Sub), 10))
		b.WriteByte(':')
		escapeTag(&b, u.Tenant)
	default:
		b.WriteString("?")
	}
	b.WriteByte('}')
	return b.String()
}

// unit returns all keys of unit u.
func (k Keys) unit(u Unit) routingfmt.UnitKeys { return routingfmt.Keys(k.Tag(u)) }

// Table returns the control-Redis key holding the current route table (HASH gen, table).
func (k Keys) Table() string { return k.prefix() + "table" }

// ControlTag returns the hash tag "{<prefix>:table}", braces included. A key that starts with
// it lives in the table key's hash slot on a clustered control Redis, so one script can
// touch both (see [Store.PublishGuarded]).
func (k Keys) ControlTag() string { return slot.Tagged("", k.prefix()+"table") }

// Channel returns the pub/sub channel on which new generations are announced.
func (k Keys) Channel() string { return k.prefix() + "table:announce" }

// escapeTag writes s with '%', '{' and '}' percent-encoded, so a tenant can never end or
// open a hash tag early.
func escapeTag(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
}

// OpKey returns the field under which a tenant's operation opID is recorded in a unit's Ops
// hash (and its member in OpExpiry): the op ID scoped by its tenant, in RecordField's form.
// Operation IDs are per tenant: two tenants of a shared bucket may both use "confirm-1".
// Op records written before op IDs were scoped are stored under the bare op ID; the write
// script still finds them (for their own tenant only) until they expire.
func OpKey(tenant, opID string) string { return routingfmt.RecordField(tenant, opID) }
