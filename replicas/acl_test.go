package replicas_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/replicas"
)

// docRule returns the ACL patterns and commands the "# ACL" section of doc.go names.
func docRule(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(src), "// # ACL\n")
	require.True(t, ok, "doc.go has no ACL section")
	section, _, _ = strings.Cut(section, "// # ")
	var out []string
	for _, w := range strings.Fields(strings.ReplaceAll(section, "//", " ")) {
		w = strings.Trim(w, `"',.:;()`)
		if len(w) > 1 && strings.ContainsRune("+~%&", rune(w[0])) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestACLRuleIsTheDocumentedOne proves the rule doc.go states is the one ACLRule returns,
// which the package's tests run under (with every option that widens it) with CELEBRITYTEST_ACL=replicas.
func TestACLRuleIsTheDocumentedOne(t *testing.T) {
	rule := replicas.ACLRule(replicas.Options{WaitReplicas: 1, FleetKey: replicas.DefaultPrefix + "roll"})
	slices.Sort(rule)
	require.Equal(t, docRule(t), rule)
	outside := replicas.ACLRule(replicas.Options{FleetKey: "roll"})
	require.Equal(t, "~"+replicas.DefaultPrefix+"*", outside[0])
	require.Contains(t, outside, "~roll", "a roll outside the prefix needs its own key pattern")
	require.NotContains(t, replicas.ACLRule(replicas.Options{}), "+wait")
}
