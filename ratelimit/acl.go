package ratelimit

// aclCommands are the commands a Limiter's user runs: the scripting commands and every
// command the scripts call (Redis checks those too).
var aclCommands = []string{"+evalsha", "+eval", "+get", "+set", "+hget", "+hset", "+hmget",
	"+hincrby", "+pexpire", "+pexpireat", "+time"}

// ACLRule returns the ACL rule a host grants the Redis user of a Limiter created with o, as
// ACL SETUSER arguments: key access to the whole of o.Prefix (empty: DefaultPrefix),
// "~<prefix>*" (scripts touch derived keys of their declared key's slot), and the commands
// of the package's scripts. No other option changes the rule, and no channel is used. The
// package's tests run under this rule.
func ACLRule(o Options) []string {
	prefix := o.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return append([]string{"~" + prefix + "*"}, aclCommands...)
}
