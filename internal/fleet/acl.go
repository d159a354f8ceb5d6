package fleet

import "github.com/celebrity-go/celebrity/internal/slot"

// aclCommands are the commands of the fleet loop: the hot-set scripts (report.lua, poll.lua,
// apply.lua, learn.lua: GET, SET, HGET, HGETALL, HSET, HSETNX, HDEL, HINCRBY, HINCRBYFLOAT,
// HLEN, PEXPIRE, PUBLISH, TIME), the leader's reads of the summary (HGETALL), the heartbeat
// (PUBLISH), the subscription to the hot-set channel (SUBSCRIBE, UNSUBSCRIBE, PING on a
// silent one) and ReadHotSet's MULTI/EXEC of HGET, GET, PTTL and HGETALL.
var aclCommands = []string{"+evalsha", "+eval", "+get", "+set", "+pexpire", "+pttl", "+multi",
	"+exec", "+hget", "+hgetall", "+hset", "+hsetnx", "+hdel", "+hincrby", "+hincrbyfloat",
	"+hlen", "+publish", "+subscribe", "+unsubscribe", "+ping", "+time"}

// ACLRule returns the loop's part of a Cache's ACL rule under prefix, as ACL SETUSER
// arguments: the hot set's keys (under the hash tag {<prefix>hot}), the summary's (under
// {<prefix>sum<shard>}), the channel <prefix>hot and the commands above, with "+info" when
// nodeLoad is set (Options.PromoteShare: the leader reads each master's INFO stats).
func ACLRule(prefix string, nodeLoad bool) []string {
	rule := []string{"~" + slot.Tagged(prefix, prefix+"hot") + "*", "~" + prefix + "{" + prefix + "sum*", "&" + prefix + "hot"}
	rule = append(rule, aclCommands...)
	if nodeLoad {
		rule = append(rule, "+info")
	}
	return rule
}
