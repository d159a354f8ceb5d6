package replicas

import "strings"

// aclCommands are the commands a Replicator's user runs: the scripting commands and every
// command the scripts call (Redis checks those too), BLPOP included.
var aclCommands = []string{"+evalsha", "+eval", "+get", "+set", "+del", "+pexpire", "+pttl",
	"+rpush", "+time", "+blpop"}

// aclFleetCommands are the commands of the fleet roll (Options.FleetKey).
var aclFleetCommands = []string{"+zadd", "+zrem", "+zrange", "+zremrangebyscore"}

// ACLRule returns the ACL rule a host grants the Redis user of a Replicator configured
// with o, as ACL SETUSER arguments: key access to the whole of o.Prefix (empty:
// DefaultPrefix) and the commands of the package's scripts, with "+wait" when
// o.WaitReplicas is positive and, with o.FleetKey, key access to it (when it is outside
// the prefix) and the roll's commands. BLPOP is how an instance waiting for a fleet-wide
// fill learns it is done; a host may leave it out, and the waiter polls instead. No channel
// is used. The package's tests run under the rule of a Replicator with every option that
// widens it.
func ACLRule(o Options) []string {
	prefix := o.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	rule := append([]string{"~" + prefix + "*"}, aclCommands...)
	if o.WaitReplicas > 0 {
		rule = append(rule, "+wait")
	}
	if o.FleetKey != "" {
		if !strings.HasPrefix(o.FleetKey, prefix) {
			rule = append(rule, "~"+o.FleetKey)
		}
		rule = append(rule, aclFleetCommands...)
	}
	return rule
}
