package escrow

// aclCommands are the commands a Central's or a Pool's user runs: the scripting commands
// and every command the scripts and the Go code call (Redis checks those too).
var aclCommands = []string{"+evalsha", "+eval", "+evalsha_ro", "+eval_ro", "+exists", "+get",
	"+hdel", "+hexists", "+hget", "+hgetall", "+hincrby", "+hmget", "+hset", "+set", "+zadd",
	"+zcard", "+zrange", "+zrem", "+zscore", "+del", "+time", "+zrangebyscore",
	"+zremrangebyrank", "+zrevrangebyscore"}

// ACLRule returns the ACL rule a host grants the Redis user of a Central or a Pool created
// with o (a CentralOptions or a PoolOptions), for the ledgers' client and the witnesses'
// alike, as ACL SETUSER arguments: key access to the whole of o's Prefix (empty:
// DefaultPrefix), "~<prefix>*", the commands of the package's scripts and Go code, and
// "+config|get", which a host may leave out (Init checks the durability settings with it
// and, refused, warns instead). No other option changes the rule, and no channel is used.
// The package's tests run under this rule.
func ACLRule[O CentralOptions | PoolOptions](o O) []string {
	var prefix string
	switch o := any(o).(type) {
	case CentralOptions:
		prefix = o.Prefix
	case PoolOptions:
		prefix = o.Prefix
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return append(append([]string{"~" + prefix + "*"}, aclCommands...), "+config|get")
}
