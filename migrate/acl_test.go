package migrate_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/acldoc"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// TestACLRuleIsTheDocumentedOne proves the rules doc.go states are the ones ControlACLRule
// and ShardACLRule return (the shard rule with a Cache's tenant-key commands), that they hold
// routing's rules for the same prefix, and that ACLRule, which the package's tests run under
// with CELEBRITYTEST_ACL=migrate, is their union.
func TestACLRuleIsTheDocumentedOne(t *testing.T) {
	const tenants = "tenant:*"
	control, shard := migrate.ControlACLRule(migrate.CacheOptions{TenantKeys: []string{tenants}}),
		migrate.ShardACLRule(migrate.CacheOptions{TenantKeys: []string{tenants}})
	for _, r := range [][]string{control, shard} {
		sorted := slices.Sorted(slices.Values(r))
		require.Equal(t, slices.Compact(slices.Clone(sorted)), sorted, "no repeats")
	}
	require.Contains(t, shard, "~"+tenants)
	doc, err := acldoc.Rule("doc.go")
	require.NoError(t, err)
	both := slices.DeleteFunc(append(slices.Clone(control), shard...), func(r string) bool { return r == "~"+tenants })
	slices.Sort(both)
	require.Equal(t, doc, slices.Compact(both))

	for _, r := range routing.ControlACLRule(routing.Options{}) {
		require.Contains(t, control, r, "routing's control rule")
	}
	for _, r := range routing.ShardACLRule(routing.Options{}) {
		require.Contains(t, shard, r, "routing's shard rule")
	}
	coordinator := migrate.ShardACLRule(migrate.Options{})
	for _, r := range []string{"+pttl", "+dump", "+restore"} {
		require.NotContains(t, coordinator, r, "a Coordinator copies no tenant key")
	}
	union := slices.Sorted(slices.Values(migrate.ACLRule(migrate.Options{Prefix: "P"})))
	all := append(migrate.ControlACLRule(migrate.CacheOptions{Prefix: "P"}), migrate.ShardACLRule(migrate.CacheOptions{Prefix: "P"})...)
	slices.Sort(all)
	require.Equal(t, slices.Compact(all), union)
	require.Equal(t, migrate.ACLRule(migrate.Options{Prefix: routing.DefaultPrefix}), migrate.ACLRule(migrate.Options{}))
}
