package routing

// Install exposes install to tests: it reports whether t became the current table.
func (r *Router) Install(t *Table) (bool, error) { return r.install(t) }
