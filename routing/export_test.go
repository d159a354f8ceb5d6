package routing

// Install exposes install to tests: it reports whether t became the current table.
func (r *Router) Install(t *Table) (bool, error) { return r.install(t) }

// WriteScript exposes the guarded write script so tests can call it with malformed arguments.
var WriteScript = writeScript
