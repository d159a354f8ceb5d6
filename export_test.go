package celebrity

// DemotedIn returns the interval (Unix time over ReportInterval) whose evaluation decided the
// last demotion this instance made as leader, if it was of key.
func DemotedIn[V any](c *Cache[V], key string) (int64, bool) {
	d := c.fleet.lastDemo.Load()
	if d == nil || d.key != key {
		return 0, false
	}
	return d.slot, true
}

// LastHotRead returns the latest interval in which this instance counted a read of key as a
// hot key's, or 0.
func LastHotRead[V any](c *Cache[V], key string) int64 {
	v, ok := c.fleet.hotReads.Load(key)
	if !ok {
		return 0
	}
	h := v.(*hotCount)
	var last int64
	for i := range h.slot {
		if h.n[i].Load() > 0 {
			last = max(last, h.slot[i].Load())
		}
	}
	return last
}

// FleetSizeOf returns the fleet's size as this instance knows it (the leader's estimate,
// read by its polls), which sets how many intervals apart it reports.
func FleetSizeOf[V any](c *Cache[V]) int64 { return c.fleet.fleetN.Load() }

// SummaryTags returns the summary shards' keys under prefix (less their interval).
func SummaryTags(prefix string, shards int) []string { return summaryTags(prefix, shards) }

// SumSlotWidth is how far from its target slot a summary shard's slot may be.
var SumSlotWidth = sumSlotWidth
