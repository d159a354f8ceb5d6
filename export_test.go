package celebrity

import "github.com/celebrity-go/celebrity/internal/fleet"

// DemotedIn returns the interval (Unix time over ReportInterval) whose evaluation decided the
// last demotion this instance made as leader, if it was of key.
func DemotedIn[V any](c *Cache[V], key string) (int64, bool) { return c.loop.DemotedIn(key) }

// LastHotRead returns the latest interval in which this instance counted a read of key as a
// hot key's, or 0.
func LastHotRead[V any](c *Cache[V], key string) int64 { return c.loop.LastHotRead(key) }

// FleetSizeOf returns the fleet's size as this instance knows it (the leader's estimate,
// read by its polls), which sets how many intervals apart it reports.
func FleetSizeOf[V any](c *Cache[V]) int64 { return c.loop.FleetSize() }

// SummaryTags returns the summary shards' keys under prefix (less their interval).
var SummaryTags = fleet.SummaryTags

// SumSlotWidth is how far from its target slot a summary shard's slot may be.
var SumSlotWidth = fleet.SumSlotWidth
