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
// Coordinator or a Cache created with o (an Options or a CacheOptions), as ACL SETUSER
// arguments: routing.ControlACLRule for o's Prefix (empty: routing.DefaultPrefix; the
// journal's keys are under the same hash tag) and the journal's commands, without repeats.
// Only the Prefix changes the rule.
func ControlACLRule[O Options | CacheOptions](o O) []string {
	prefix, _ := aclOptions(o)
	return aclUnion(routing.ControlACLRule(routing.StoreOptions{Prefix: prefix}), aclControlCommands)
}

// ShardACLRule returns the ACL rule a host grants each shard's user of a Coordinator or a
// Cache created with o (an Options or a CacheOptions), as ACL SETUSER arguments:
// routing.ShardACLRule for o's Prefix and the copy's commands, without repeats. For a Cache,
// CacheOptions.TenantKeys (the key patterns of the tenants' own keys, the host's, not under
// the prefix) are granted with the commands that copy them; a Coordinator needs none. No
// other option changes the rule.
func ShardACLRule[O Options | CacheOptions](o O) []string {
	prefix, tenantKeys := aclOptions(o)
	rule := aclUnion(routing.ShardACLRule(routing.ShardOptions{Prefix: prefix}), aclShardCommands)
	if len(tenantKeys) == 0 {
		return rule
	}
	for _, k := range tenantKeys {
		rule = aclUnion(rule, []string{"~" + k})
	}
	return aclUnion(rule, aclTenantCommands)
}

// ACLRule returns the union of ControlACLRule(o) and ShardACLRule(o), without repeats: the
// rule of one user that is both the control Redis's and the shards' (one Redis serving both).
func ACLRule[O Options | CacheOptions](o O) []string {
	return aclUnion(ControlACLRule(o), ShardACLRule(o))
}

// aclOptions returns what the rules read of o: its Prefix and a Cache's TenantKeys.
func aclOptions[O Options | CacheOptions](o O) (prefix string, tenantKeys []string) {
	switch o := any(o).(type) {
	case Options:
		return o.Prefix, nil
	case CacheOptions:
		return o.Prefix, o.TenantKeys
	}
	return "", nil
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
