package migrate

import "github.com/celebrity-go/celebrity/routing"

// aclControlCommands are the commands the control Redis's user runs besides routing's: the
// journal, its lock, epoch and index (the scripts' HGETALL, ZRANGE, INCR, TIME, EXISTS, GET,
// SET, ZADD, DEL; Coordinator.List's ZRANGE and HGETALL).
var aclControlCommands = []string{"+hgetall", "+zrange", "+incr", "+time", "+exists", "+get",
	"+set", "+zadd", "+del"}

// aclShardCommands are the commands each shard's user runs besides routing's: the copy's
// HSCAN and ZMSCORE of the snapshot, the probe script's XRANGE of the change log, and DEL of
// a stale import or of a cleaned-up source.
var aclShardCommands = []string{"+del", "+zmscore", "+xrange"}

// aclTenantCommands are the commands a Cache runs on the tenants' own keys: it copies each
// hot key with its remaining TTL.
var aclTenantCommands = []string{"+pttl", "+dump", "+restore"}

// ControlACLRule returns the ACL rule a host grants the control Redis's user of a
// Coordinator or a Cache whose prefix is prefix (empty: routing.DefaultPrefix), as ACL
// SETUSER arguments: routing.ControlACLRule (the journal's keys are under the same hash
// tag) and the journal's commands, without repeats.
func ControlACLRule(prefix string) []string {
	return aclUnion(routing.ControlACLRule(prefix), aclControlCommands)
}

// ShardACLRule returns the ACL rule a host grants each shard's user of a Coordinator or a
// Cache whose prefix is prefix (empty: routing.DefaultPrefix), as ACL SETUSER arguments:
// routing.ShardACLRule and the copy's commands, without repeats. For a Cache, tenantKeys are
// the key patterns of the tenants' own keys (the host's, not under the prefix), granted with
// the commands that copy them; a Coordinator needs none.
func ShardACLRule(prefix string, tenantKeys ...string) []string {
	rule := aclUnion(routing.ShardACLRule(prefix), aclShardCommands)
	if len(tenantKeys) == 0 {
		return rule
	}
	for _, k := range tenantKeys {
		rule = aclUnion(rule, []string{"~" + k})
	}
	return aclUnion(rule, aclTenantCommands)
}

// ACLRule returns the union of ControlACLRule and ShardACLRule, without repeats: the rule of
// one user that is both the control Redis's and the shards' (one Redis serving both).
func ACLRule(prefix string, tenantKeys ...string) []string {
	return aclUnion(ControlACLRule(prefix), ShardACLRule(prefix, tenantKeys...))
}

// aclUnion returns a followed by the elements of b not in a, without repeats.
func aclUnion(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	seen := make(map[string]bool, len(a)+len(b))
	for _, r := range append(append([]string(nil), a...), b...) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}
