package ratelimit

// aclCommands are the commands a Limiter's user runs: the scripting commands and every
// command the scripts call (Redis checks those too).
var aclCommands = []string{"+evalsha", "+eval", "+get", "+set", "+hget", "+hset", "+hmget",
	"+hincrby", "+pexpire", "+pexpireat", "+time"}

// ACLRule returns the ACL rule a host grants the Redis user of a Limiter whose
// Options.Prefix is prefix (empty: DefaultPrefix), as ACL SETUSER arguments: key access to
// the whole prefix ("~<prefix>*"; scripts touch derived keys of their declared key's slot)
// and the commands of the package's scripts. No channel is used. The package's tests run
// under this rule.
func ACLRule(prefix string) []string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return append([]string{"~" + prefix + "*"}, aclCommands...)
}
