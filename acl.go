package celebrity

import (
	"cmp"

	"github.com/celebrity-go/celebrity/internal/fleet"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

// ACLRule returns the ACL rule a host grants the Redis user of a Cache configured with o, as
// ACL SETUSER arguments, without repeats: the Replicator's rule (replicas.ACLRule for the
// prefix o.Prefix+"r:"), the Invalidator's (l1cache.ACLRule for the channel o.Prefix+"inv"),
// and the fleet loop's keys (the hot set's, under the hash tag {<prefix>hot}, and the
// summary's, under {<prefix>sum<shard>}), its channel o.Prefix+"hot" and its commands, with
// "+info" when o.Loop.PromoteShare is positive (the leader reads each master's INFO stats).
// o.Prefix empty is DefaultPrefix; no other option changes the rule. Redis matches key and
// channel patterns as globs, so a prefix holding '*', '?', '[' or '\' grants more than
// itself; the package's tests run under the rule for the prefix pattern "t*", which covers
// every test's prefix.
func ACLRule[V any](o Options[V]) []string {
	o.Prefix = cmp.Or(o.Prefix, DefaultPrefix)
	p := o.Prefix
	rule := replicas.ACLRule(o.replicasOptions())
	rule = append(rule, l1cache.ACLRule(l1cache.InvalidatorOptions{Channel: o.invalidationChannel()})...)
	rule = append(rule, fleet.ACLRule(p, o.Loop.PromoteShare > 0)...)
	out := rule[:0]
	seen := make(map[string]bool, len(rule))
	for _, r := range rule {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}
