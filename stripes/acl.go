package stripes

// aclCommands are the commands a Counter's, a Family's or a Reader's user runs: the
// scripting commands, every command the scripts call (Redis checks those too) and the ones
// the Go code sends (HGETALL, HGET, HSETNX, HMGET, HSET, PEXPIRE, and CLUSTER SLOTS when a
// generation is placed on a cluster).
var aclCommands = []string{"+evalsha", "+eval", "+hgetall", "+hget", "+hset", "+hsetnx",
	"+hmget", "+hincrby", "+hdel", "+hkeys", "+del", "+pexpire", "+pexpireat", "+sadd",
	"+srem", "+scard", "+smembers", "+time", "+cluster|slots"}

// ACLRule returns the ACL rule a host grants the Redis user of a Counter, a Family or a
// Reader whose Options.Prefix is prefix (empty: DefaultPrefix), as ACL SETUSER arguments:
// key access to the whole prefix ("~<prefix>*") and the commands of the package's scripts
// and Go code. No channel is used. The package's tests run under this rule.
func ACLRule(prefix string) []string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return append([]string{"~" + prefix + "*"}, aclCommands...)
}
