package ratelimit

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/acldoc"
)

// TestACLRuleIsTheDocumentedOne proves the rule doc.go states is the one ACLRule returns,
// which the package's tests run under with CELEBRITYTEST_ACL=ratelimit.
func TestACLRuleIsTheDocumentedOne(t *testing.T) {
	rule := ACLRule(Options{Prefix: DefaultPrefix})
	slices.Sort(rule)
	doc, err := acldoc.Rule("doc.go")
	require.NoError(t, err)
	require.Equal(t, doc, rule)
	require.Equal(t, "~"+DefaultPrefix+"*", ACLRule(Options{})[0])
}
