package celebrity_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/internal/acldoc"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestACLRuleIsTheDocumentedOne proves the rule doc.go states is the one ACLRule returns,
// which the package's tests run under (with PromoteShare) with CELEBRITYTEST_ACL=celebrity,
// and that it holds the Replicator's and the Invalidator's rules for the prefix and channel
// the Cache gives them.
func TestACLRuleIsTheDocumentedOne(t *testing.T) {
	rule := celebrity.ACLRule(celebrity.Options[string]{Loop: celebrity.LoopOptions{PromoteShare: 0.5}})
	sorted := slices.Sorted(slices.Values(rule))
	require.Equal(t, slices.Compact(slices.Clone(sorted)), sorted, "ACLRule has no repeats")
	doc, err := acldoc.Rule("doc.go")
	require.NoError(t, err)
	require.Equal(t, doc, sorted)

	for _, r := range replicas.ACLRule(replicas.Options{Prefix: celebrity.DefaultPrefix + "r:"}) {
		require.Contains(t, rule, r, "the Replicator's rule")
	}
	for _, r := range l1cache.ACLRule(l1cache.InvalidatorOptions{Channel: celebrity.DefaultPrefix + "inv"}) {
		require.Contains(t, rule, r, "the Invalidator's rule")
	}
	plain := celebrity.ACLRule(celebrity.Options[string]{})
	require.NotContains(t, plain, "+info", "INFO only with PromoteShare")
	require.Equal(t, plain, celebrity.ACLRule(celebrity.Options[int]{Prefix: celebrity.DefaultPrefix}))
	require.Contains(t, celebrity.ACLRule(celebrity.Options[string]{Prefix: "app:"}), "~app:{app:hot}*")
}
