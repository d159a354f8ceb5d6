package routing_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/acldoc"
	"github.com/celebrity-go/celebrity/routing"
)

// TestACLRuleIsTheDocumentedOne proves the rules doc.go states are the ones ControlACLRule
// and ShardACLRule return, and ACLRule their union, which the package's tests run under
// with CELEBRITYTEST_ACL=routing.
func TestACLRuleIsTheDocumentedOne(t *testing.T) {
	o := routing.Options{Prefix: "P"}
	rule := routing.ACLRule(o)
	slices.Sort(rule)
	require.Equal(t, slices.Compact(slices.Clone(rule)), rule, "ACLRule has no repeats")
	doc, err := acldoc.Rule("doc.go")
	require.NoError(t, err)
	require.Equal(t, doc, rule)
	both := append(routing.ControlACLRule(o), routing.ShardACLRule(o)...)
	slices.Sort(both)
	require.Equal(t, rule, slices.Compact(both))
	require.Equal(t, routing.ControlACLRule(o), routing.ControlACLRule(routing.StoreOptions{Prefix: "P"}))
	require.Equal(t, routing.ShardACLRule(o), routing.ShardACLRule(routing.ShardOptions{Prefix: "P"}))
	require.Equal(t, routing.ACLRule(routing.Options{Prefix: routing.DefaultPrefix}), routing.ACLRule(routing.Options{}))
}
