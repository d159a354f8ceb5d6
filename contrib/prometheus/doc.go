// Package celebrityprom exports the Stats of celebrity's components to Prometheus. One call
// registers a component's prometheus.Collector, which reads the component's Stats once per
// scrape, so nothing is recorded on the hot path:
//
//	if _, err := celebrityprom.Replicas(prometheus.DefaultRegisterer, replicator,
//		celebrityprom.Options{Name: "posts"}); err != nil {
//		...
//	}
//
// Names follow Prometheus conventions: celebrity_<package>_<field in snake_case>, with
// _total on counters (celebrity_l1cache_stale_if_error_hits_total) and _seconds on
// durations (celebrity_migrate_last_pause_seconds); amounts that go up and down (cache
// entries, hot keys) and values such as a table generation are gauges. Stats that are
// arrays or per-item become series with one label of bounded cardinality: "copy" for
// replicas (only the copies in use: none on a standalone server, where replication is
// off), "stripe" for the newest generation of a stripes counter (at most its stripe
// count). No key, tenant or event ID is ever a label; Options.Name, chosen by the host, is
// the only other one. A stripes.Family's counts are added over its names.
//
// Latency: the only duration the components report per operation is l1cache's load
// (Event.Duration); LoadDurations turns it into the histogram
// celebrity_l1cache_load_duration_seconds.
//
// A field added to a package's Stats is exported under its snake_case name without a
// change here: an integer as a counter, a time.Duration as a gauge in seconds, a bool as a
// 0/1 gauge.
package celebrityprom
