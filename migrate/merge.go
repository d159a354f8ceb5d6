package migrate

import "context"

// MergeSpec asks for a merge: a spread tenant's sub-buckets return into one override unit
// of the tenant on one shard (the reverse of a split).
type MergeSpec struct {
	// ID names the migration; it must be unique. Default: a fresh random ID.
	ID string
	// Tenant is the spread tenant to merge. It must be valid UTF-8, and the current table
	// must place it by a spread.
	Tenant string
	// Target is the shard of the tenant's override unit after the merge. It must be known
	// to the Coordinator and named in the table; it may hold one of the sub-buckets (the
	// override unit is another unit of the same shard).
	Target string
}

// Merge returns a spread tenant to one unit: [Coordinator.StartMerge] then
// [Coordinator.Resume]. It is the split in reverse ([Coordinator.Split] with one target),
// with the same guarantees and the same durable states: every old sub-bucket is a source
// (a lane with its own snapshot and change log), the tenant's override unit on Target is
// the one target, the barrier closes every sub-bucket, the verification compares the
// tenant's items of all sub-buckets with those of the unit, and the flip opens the unit at
// the new generation and publishes one table in which the tenant is overridden onto Target
// and no longer spread. A router on the old table is refused by the closed sub-buckets,
// learns the new table and retries in the unit with the same op ID, where an operation
// applied before the barrier replays its first result. It holds the locks of the tenant
// unit and of every old sub-bucket; a cancel or an abort (a trimmed change log, a
// verification that differs) deletes the unit's copy and reopens every sub-bucket it
// closed. [Coordinator.Cleanup] deletes the sub-buckets' closed copies after the grace.
// Bad input (a tenant that is not spread, an unknown target) fails with ErrInvalid and
// changes nothing.
func (c *Coordinator) Merge(ctx context.Context, spec MergeSpec) (Status, error) {
	return c.Split(ctx, spec.split())
}

// StartMerge checks spec against the current table and the shards, writes the merge's
// journal record (state OwnedA) and takes its locks in one step, as [Coordinator.StartSplit]
// does. The returned Status has SplitFrom = the old spread and SplitTo = [Target].
func (c *Coordinator) StartMerge(ctx context.Context, spec MergeSpec) (Status, error) {
	return c.StartSplit(ctx, spec.split())
}

// split is the merge as the split it is: one target.
func (s MergeSpec) split() SplitSpec {
	return SplitSpec{ID: s.ID, Tenant: s.Tenant, Targets: []string{s.Target}}
}
