package hotkeys

// ACLRule returns the ACL rule a host grants the Redis user of a Probe that looks at the
// keys matching pattern (a glob such as "user:*"), as ACL SETUSER arguments: read-only
// access to those keys ("%R~<pattern>", Redis 7), OBJECT FREQ, SCAN for ScanTop, and
// CONFIG GET and COMMAND INFO for Capabilities. The Detector needs no user, and a
// ClusterShards only what every go-redis cluster client's user has. The package's tests run
// under this rule.
func ACLRule(pattern string) []string {
	return []string{"%R~" + pattern, "+object|freq", "+scan", "+config|get", "+command|info"}
}
