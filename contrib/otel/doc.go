// Package celebrityotel exports the Stats of celebrity's components as OpenTelemetry
// metrics. One call registers a component with a metric.Meter; its instruments read the
// component's Stats once per collection, so nothing is recorded on the hot path:
//
//	meter := otel.Meter("github.com/celebrity-go/celebrity")
//	reg, err := celebrityotel.Replicas(meter, replicator, celebrityotel.Options{Name: "posts"})
//	...
//	defer reg.Unregister()
//
// Names follow the OpenTelemetry conventions: celebrity.<package>.<field in snake_case>
// (celebrity.l1cache.stale_if_error_hits, celebrity.replicas.copy_reads), with units in
// UCUM ({event}, {read}, s). A count since the component started is an observable counter;
// an amount that goes up and down and adds across instances (cache entries, hot keys) an
// up-down counter; a value that does not add (a table generation, a pause in seconds,
// subscribed or not) a gauge. Stats that are arrays or per-item become series with one
// attribute of bounded cardinality: "copy" for replicas (only the copies in use: none on a
// standalone server, where replication is off), "stripe" for the newest generation of a
// stripes counter (at most its stripe count). No key, tenant or event ID is ever an
// attribute; Options.Name, chosen by the host, is the only other one. A stripes.Family's
// counts are added over its names.
//
// Latency: the only duration the components report per operation is l1cache's load
// (Event.Duration); LoadDurations turns it into the histogram
// celebrity.l1cache.load.duration. Migrations report the write pause of the last one as
// the gauge celebrity.migrate.last_pause.
//
// A field added to a package's Stats is exported under its snake_case name without a
// change here: an integer as a counter, a time.Duration as a gauge in seconds, a bool as a
// 0/1 gauge.
package celebrityotel
