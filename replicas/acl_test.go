package replicas_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/acldoc"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestACLRuleIsTheDocumentedOne proves the rule doc.go states is the one ACLRule returns,
// which the package's tests run under (with every option that widens it) with CELEBRITYTEST_ACL=replicas.
func TestACLRuleIsTheDocumentedOne(t *testing.T) {
	rule := replicas.ACLRule(replicas.Options{WaitReplicas: 1, FleetKey: replicas.DefaultPrefix + "roll"})
	slices.Sort(rule)
	doc, err := acldoc.Rule("doc.go")
	require.NoError(t, err)
	require.Equal(t, doc, rule)
	outside := replicas.ACLRule(replicas.Options{FleetKey: "roll"})
	require.Equal(t, "~"+replicas.DefaultPrefix+"*", outside[0])
	require.Contains(t, outside, "~roll", "a roll outside the prefix needs its own key pattern")
	require.NotContains(t, replicas.ACLRule(replicas.Options{}), "+wait")
}
