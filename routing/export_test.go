package routing

// Install exposes install to tests: it reports whether t became the current table.
func (r *Router) Install(t *Table) (bool, error) { return r.install(t) }

// WriteScript exposes the guarded write script so tests can call it with malformed arguments.
var WriteScript = writeScript

// LoadScript exposes the load-report script so tests can replay a report.
var LoadScript = loadScript

// CountLoad counts one operation of tenant as Do and Get do, without Redis.
func (r *Router) CountLoad(tenant string) { r.load.count(tenant) }

// TakeLoad returns the counts since the last take, as the publisher takes them.
func (r *Router) TakeLoad() (ops uint64, tracked int) {
	ops, entries := r.load.take()
	return ops, len(entries)
}

// PlanProvision exposes Provision's pure plan step: the units it would open per shard
// (buckets, then tenant marks, then override and spread units), or its refusal.
func PlanProvision(t *Table, names []string, found [][]Ownership) (buckets, marks, claims map[string][]Unit, err error) {
	p, err := planProvision(t, names, t.Units(), found)
	return p.buckets, p.marks, p.claims, err
}
