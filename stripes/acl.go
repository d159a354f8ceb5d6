package stripes

// aclCommands are the commands a Counter's, a Family's or a Reader's user runs: the
// scripting commands, every command the scripts call (Redis checks those too) and the ones
// the Go code sends (HGETALL, HGET, HSETNX, HMGET, HSET, PEXPIRE, and CLUSTER SLOTS when a
// generation is placed on a cluster).
var aclCommands = []string{"+evalsha", "+eval", "+hgetall", "+hget", "+hset", "+hsetnx",
	"+hmget", "+hincrby", "+hdel", "+hkeys", "+del", "+pexpire", "+pexpireat", "+sadd",
	"+srem", "+scard", "+smembers", "+time", "+cluster|slots"}

// ACLRule returns the ACL rule a host grants the Redis user of a Counter created with o (of
// a Family, its FamilyOptions.Counter; of a Reader, its Counter's), as ACL SETUSER
// arguments: key access to the whole of o.Prefix (empty: DefaultPrefix), "~<prefix>*", and
// the commands of the package's scripts and Go code. No other option changes the rule, and
// no channel is used. The package's tests run under this rule.
func ACLRule(o Options) []string {
	prefix := o.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return append([]string{"~" + prefix + "*"}, aclCommands...)
}
