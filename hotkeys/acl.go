package hotkeys

// ACLRule returns the ACL rule a host grants the Redis user of a Probe that scans with o
// (ScanTop's options) and reads the frequencies of keys matching o.Match (a glob such as
// "user:*"; empty: "*", every key, as ScanTop's default), as ACL SETUSER arguments:
// read-only access to those keys ("%R~<pattern>", Redis 7), OBJECT FREQ, SCAN for ScanTop,
// and CONFIG GET and COMMAND INFO for Capabilities. No other option changes the rule. The
// Detector needs no user, and a ClusterShards only what every go-redis cluster client's user
// has. The package's tests run under this rule.
func ACLRule(o ScanOptions) []string {
	pattern := o.Match
	if pattern == "" {
		pattern = "*"
	}
	return []string{"%R~" + pattern, "+object|freq", "+scan", "+config|get", "+command|info"}
}
