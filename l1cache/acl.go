package l1cache

// aclCommands are the commands an Invalidator's user runs: publishing and subscribing on
// global and on sharded pub/sub (which one depends on the client and
// InvalidatorOptions.PubSub), and PING, which checks a silent subscription.
var aclCommands = []string{"+publish", "+subscribe", "+unsubscribe", "+spublish",
	"+ssubscribe", "+sunsubscribe", "+ping"}

// ACLRule returns the ACL rule a host grants the Redis user of an Invalidator created with
// o, as ACL SETUSER arguments: the channel o.Channel (empty: DefaultChannel), "&<channel>",
// and the pub/sub commands. No other option changes the rule, and no key is used (the Cache
// itself needs no Redis user). Redis matches the channel as a glob pattern, so a channel
// holding '*', '?', '[' or '\' grants more than itself unless the host escapes them; a
// pattern such as "app:*" grants the channels of several caches at once. The package's
// tests run under the rule for the channel prefix+"*" of the test kit's prefix, which covers
// the channel of every test.
func ACLRule(o InvalidatorOptions) []string {
	channel := o.Channel
	if channel == "" {
		channel = DefaultChannel
	}
	return append([]string{"&" + channel}, aclCommands...)
}
