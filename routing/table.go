package routing

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/celebrity-go/celebrity/internal/errs"
)

// The documented limits of a Table.
const (
	// MinBuckets and MaxBuckets bound Table.Buckets (B). B is fixed for a table's life:
	// changing it moves almost every tenant.
	MinBuckets = 1
	MaxBuckets = 65536
	// MaxSpread bounds the number of sub-buckets of one spread tenant.
	MaxSpread = 1024
	// MaxShards bounds the number of shards a table names.
	MaxShards = 65535
	// MaxTenantLen bounds a tenant's name, in bytes: an overridden or spread tenant rides
	// in every table every Router fetches, and every tenant in its record fields.
	MaxTenantLen = 256
)

// tenantProblem returns why tenant is not a usable tenant name ("" when it is): empty,
// longer than MaxTenantLen bytes, or not valid UTF-8 (a table stores it as JSON text, which
// cannot carry other bytes losslessly). It quotes at most a short prefix of the name.
func tenantProblem(tenant string) string {
	switch {
	case tenant == "":
		return "tenant is empty"
	case len(tenant) > MaxTenantLen:
		return fmt.Sprintf("tenant must be 1..%d bytes, got %d (%q)", MaxTenantLen, len(tenant), errs.Short(tenant))
	case !utf8.ValidString(tenant):
		return fmt.Sprintf("tenant %q is not valid UTF-8 (a table stores it as JSON text, which cannot carry other bytes losslessly)", errs.Short(tenant))
	}
	return ""
}

// Range assigns buckets First..Last (inclusive) to a shard.
type Range struct {
	First uint32 `json:"first"`
	Last  uint32 `json:"last"`
	Shard string `json:"shard"`
}

// Table is one generation of the route table. It is plain data, encoded as JSON in the
// control Redis; build one with [EvenTable] or by hand, change it with the Set* methods on
// a [Table.Next] copy, and check it with [Table.Validate]. A Table installed in a Router must
// not be modified.
type Table struct {
	// Generation numbers the table; published generations are 1, 2, 3, ... without gaps.
	Generation uint64 `json:"generation"`
	// Buckets is B, the number of hash buckets, MinBuckets..MaxBuckets.
	Buckets uint32 `json:"buckets"`
	// Shards names every shard the table may use.
	Shards []string `json:"shards"`
	// Ranges assign every bucket to exactly one shard.
	Ranges []Range `json:"ranges"`
	// Overrides place a tenant on a shard of its own choosing, outside its bucket.
	Overrides map[string]string `json:"overrides,omitempty"`
	// Spreads split a tenant into len(shards) sub-buckets; sub-bucket i lives on shards[i]
	// and holds the tenant's records whose key hashes to i (xxhash64(key) % K).
	Spreads map[string][]string `json:"spreads,omitempty"`
}

// EvenTable returns a table at generation gen with buckets split into contiguous, nearly
// equal ranges over shards, in order.
func EvenTable(gen uint64, buckets uint32, shards ...string) *Table {
	t := &Table{Generation: gen, Buckets: buckets, Shards: slices.Clone(shards)}
	n := uint32(len(shards))
	if n == 0 || buckets == 0 {
		return t
	}
	var first uint32
	for i, s := range shards {
		size := buckets / n
		if uint32(i) < buckets%n {
			size++
		}
		if size == 0 {
			continue
		}
		t.Ranges = append(t.Ranges, Range{First: first, Last: first + size - 1, Shard: s})
		first += size
	}
	return t
}

// Clone returns a deep copy of t.
func (t *Table) Clone() *Table {
	c := *t
	c.Shards = slices.Clone(t.Shards)
	c.Ranges = slices.Clone(t.Ranges)
	c.Overrides = maps.Clone(t.Overrides)
	if t.Spreads != nil {
		c.Spreads = make(map[string][]string, len(t.Spreads))
		for k, v := range t.Spreads {
			c.Spreads[k] = slices.Clone(v)
		}
	}
	return &c
}

// Next returns a copy of t at generation t.Generation + 1, ready to be changed and published.
func (t *Table) Next() *Table {
	c := t.Clone()
	c.Generation++
	return c
}

// BucketOwner returns the shard that owns bucket b, or "" if none does.
func (t *Table) BucketOwner(b uint32) string {
	for _, r := range t.Ranges {
		if b >= r.First && b <= r.Last {
			return r.Shard
		}
	}
	return ""
}

// Owner returns the shard unit u is assigned to, or "" if the table does not assign it.
func (t *Table) Owner(u Unit) string {
	switch u.Kind {
	case KindBucket:
		if u.Bucket < t.Buckets {
			return t.BucketOwner(u.Bucket)
		}
	case KindTenant:
		return t.Overrides[u.Tenant]
	case KindSpread:
		if s := t.Spreads[u.Tenant]; int(u.Sub) < len(s) {
			return s[u.Sub]
		}
	}
	return ""
}

// Units returns every unit the table assigns, with its shard: the buckets in order, then
// overrides and spreads sorted by tenant.
func (t *Table) Units() []Placement {
	out := make([]Placement, 0, int(t.Buckets)+len(t.Overrides)+len(t.Spreads))
	for _, r := range t.Ranges {
		for b := r.First; b <= r.Last && b < t.Buckets; b++ {
			out = append(out, Placement{Unit: BucketUnit(b), Shard: r.Shard})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Unit.Bucket < out[j].Unit.Bucket })
	for _, tenant := range slices.Sorted(maps.Keys(t.Overrides)) {
		out = append(out, Placement{Unit: TenantUnit(tenant), Shard: t.Overrides[tenant]})
	}
	for _, tenant := range slices.Sorted(maps.Keys(t.Spreads)) {
		for i, s := range t.Spreads[tenant] {
			out = append(out, Placement{Unit: SpreadUnit(tenant, uint32(i)), Shard: s})
		}
	}
	return out
}

// Placement is one unit and the shard a table assigns it to.
type Placement struct {
	Unit  Unit
	Shard string
}

// SetBucket assigns bucket b to shard, rewriting the ranges. It does not validate.
func (t *Table) SetBucket(b uint32, shard string) {
	owners := make([]string, t.Buckets)
	for _, r := range t.Ranges {
		for x := r.First; x <= r.Last && x < t.Buckets; x++ {
			owners[x] = r.Shard
		}
	}
	if b < t.Buckets {
		owners[b] = shard
	}
	t.Ranges = t.Ranges[:0:0]
	for x := uint32(0); x < t.Buckets; x++ {
		if n := len(t.Ranges); n > 0 && t.Ranges[n-1].Shard == owners[x] && t.Ranges[n-1].Last == x-1 {
			t.Ranges[n-1].Last = x
			continue
		}
		if owners[x] != "" {
			t.Ranges = append(t.Ranges, Range{First: x, Last: x, Shard: owners[x]})
		}
	}
}

// SetOverride places tenant on shard; an empty shard removes the override.
func (t *Table) SetOverride(tenant, shard string) {
	if shard == "" {
		delete(t.Overrides, tenant)
		return
	}
	if t.Overrides == nil {
		t.Overrides = make(map[string]string)
	}
	t.Overrides[tenant] = shard
}

// SetSpread spreads tenant over len(shards) sub-buckets; nil removes the spread.
func (t *Table) SetSpread(tenant string, shards []string) {
	if shards == nil {
		delete(t.Spreads, tenant)
		return
	}
	if t.Spreads == nil {
		t.Spreads = make(map[string][]string)
	}
	t.Spreads[tenant] = slices.Clone(shards)
}

// Validate reports whether the table is usable: generation >= 1, B within
// MinBuckets..MaxBuckets, known and unique non-empty shard names of valid UTF-8 (a table is
// stored as JSON text, which cannot carry other bytes), every bucket owned by exactly one
// range (no gap, no overlap), overrides and spreads on known shards with non-empty tenants
// of valid UTF-8, spreads of 1..MaxSpread sub-buckets, and no tenant both overridden and
// spread. The error wraps ErrInvalidTable.
func (t *Table) Validate() error {
	if t == nil {
		return badTable("nil table")
	}
	if t.Generation == 0 {
		return badTable("Generation must be >= 1, got 0")
	}
	if t.Buckets < MinBuckets || t.Buckets > MaxBuckets {
		return badTable("Buckets must be %d..%d, got %d", MinBuckets, MaxBuckets, t.Buckets)
	}
	known, err := t.validateShards()
	if err != nil {
		return err
	}
	if err := t.validateRanges(known); err != nil {
		return err
	}
	if err := t.validateOverrides(known); err != nil {
		return err
	}
	return t.validateSpreads(known)
}

// badTable returns an error wrapping ErrInvalidTable.
func badTable(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidTable}, args...)...)
}

// validateShards checks the shard list and returns its names as a set.
func (t *Table) validateShards() (map[string]bool, error) {
	if len(t.Shards) == 0 || len(t.Shards) > MaxShards {
		return nil, badTable("Shards must name 1..%d shards, got %d", MaxShards, len(t.Shards))
	}
	known := make(map[string]bool, len(t.Shards))
	for _, s := range t.Shards {
		if s == "" {
			return nil, badTable("Shards holds an empty name")
		}
		if !utf8.ValidString(s) {
			return nil, badTable("shard %q is not valid UTF-8 (a table is stored as JSON text)", s)
		}
		if known[s] {
			return nil, badTable("shard %q is listed twice", s)
		}
		known[s] = true
	}
	return known, nil
}

// validateRanges checks that the ranges cover every bucket exactly once, on known shards.
func (t *Table) validateRanges(known map[string]bool) error {
	rs := slices.Clone(t.Ranges)
	sort.Slice(rs, func(i, j int) bool { return rs[i].First < rs[j].First })
	var next uint64
	for _, r := range rs {
		switch {
		case !known[r.Shard]:
			return badTable("range %d..%d names unknown shard %q", r.First, r.Last, r.Shard)
		case r.First > r.Last || r.Last >= t.Buckets:
			return badTable("range %d..%d is outside 0..%d", r.First, r.Last, t.Buckets-1)
		case uint64(r.First) < next:
			return badTable("range %d..%d overlaps bucket %d", r.First, r.Last, next-1)
		case uint64(r.First) > next:
			return badTable("buckets %d..%d are unowned", next, r.First-1)
		}
		next = uint64(r.Last) + 1
	}
	if next != uint64(t.Buckets) {
		return badTable("buckets %d..%d are unowned", next, t.Buckets-1)
	}
	return nil
}

// validateOverrides checks each override's tenant and shard.
func (t *Table) validateOverrides(known map[string]bool) error {
	for tenant, s := range t.Overrides {
		switch {
		case tenant == "":
			return badTable("override with an empty tenant")
		case tenantProblem(tenant) != "":
			return badTable("override: %s", tenantProblem(tenant))
		case !known[s]:
			return badTable("override of tenant %q names unknown shard %q", tenant, s)
		}
		if _, ok := t.Spreads[tenant]; ok {
			return badTable("tenant %q is both overridden and spread", tenant)
		}
	}
	return nil
}

// validateSpreads checks each spread's tenant, width and shards.
func (t *Table) validateSpreads(known map[string]bool) error {
	for tenant, ss := range t.Spreads {
		switch {
		case tenant == "":
			return badTable("spread with an empty tenant")
		case tenantProblem(tenant) != "":
			return badTable("spread: %s", tenantProblem(tenant))
		case len(ss) < 1 || len(ss) > MaxSpread:
			return badTable("spread of tenant %q must have 1..%d sub-buckets, got %d", tenant, MaxSpread, len(ss))
		}
		for i, s := range ss {
			if !known[s] {
				return badTable("spread of tenant %q sub-bucket %d names unknown shard %q", tenant, i, s)
			}
		}
	}
	return nil
}
