package routing

// controlCommands are the commands the control Redis's user runs: Store.Load's HMGET,
// publish.lua (HGET, HMGET, HSET, PUBLISH), a Router's subscription to the announcements
// (SUBSCRIBE, and PING on a silent one), load.lua's report of a Router's per-tenant load
// (HSETNX, HINCRBY, HGET, HSET, PEXPIRE, ZADD, ZREMRANGEBYSCORE) and ReadTenantLoad's reads
// (ZREVRANGE, ZRANGEBYSCORE, HGETALL).
var controlCommands = []string{"+evalsha", "+eval", "+hmget", "+hget", "+hset", "+publish",
	"+subscribe", "+ping", "+hsetnx", "+hincrby", "+pexpire", "+zadd", "+zremrangebyscore",
	"+zrevrange", "+zrangebyscore", "+hgetall"}

// shardCommands are the commands a shard's user runs: every command the shard scripts call
// and Shard.Ownership's HGETALL.
var shardCommands = []string{"+evalsha", "+eval", "+exists", "+hdel", "+hexists", "+hget",
	"+hgetall", "+hmget", "+hscan", "+hset", "+xadd", "+xinfo|stream", "+zadd",
	"+zrangebyscore", "+zrem"}

// ControlACLRule returns the ACL rule a host grants the control Redis's user of a Router or a
// Store created with o (an Options or a StoreOptions; for ReadTenantLoad, Options{Prefix:
// prefix}), as ACL SETUSER arguments: the table key, the keys under its hash tag
// (PublishGuarded's guards), the load summary's keys, the announcement channel and the
// commands of the package's control-side scripts and Go code. Only o's Prefix (empty:
// DefaultPrefix) changes the rule.
func ControlACLRule[O Options | StoreOptions](o O) []string {
	var prefix string
	switch o := any(o).(type) {
	case Options:
		prefix = o.Prefix
	case StoreOptions:
		prefix = o.Prefix
	}
	prefix = namesStart(prefix)
	return append([]string{"~" + prefix + "table", "~{" + prefix + "table}*",
		"~{" + prefix + "load}*", "&" + prefix + "table:announce"}, controlCommands...)
}

// ShardACLRule returns the ACL rule a host grants each shard's user of a Router created with
// o or of a Shard created with o (an Options or a ShardOptions), as ACL SETUSER arguments:
// every key whose hash tag starts with o's Prefix and ':' (see Keys.Prefix), "~{<prefix>:*",
// and the commands of the shard scripts and Go code. Only the Prefix
// changes the rule (a Router's, not its Options.Shard's, which the Router ignores). No
// channel is used.
func ShardACLRule[O Options | ShardOptions](o O) []string {
	var prefix string
	switch o := any(o).(type) {
	case Options:
		prefix = o.Prefix
	case ShardOptions:
		prefix = o.Prefix
	}
	return append([]string{"~{" + namesStart(prefix) + "*"}, shardCommands...)
}

// ACLRule returns the union of ControlACLRule(o) and ShardACLRule(o), without repeats: the
// rule of one user that is both the control Redis's and the shards' for a Router created
// with o (one Redis serving both, as in the package's tests, which run under the rule for
// the prefix pattern prefix+"*" of the test kit's prefix: Redis matches key and channel
// patterns as globs, and that pattern covers every test's prefix).
func ACLRule(o Options) []string {
	out := ControlACLRule(o)
	seen := make(map[string]bool, len(out))
	for _, r := range out {
		seen[r] = true
	}
	for _, r := range ShardACLRule(o) {
		if !seen[r] {
			out = append(out, r)
		}
	}
	return out
}
