package stripes

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
// which the package's tests run under with CELEBRITYTEST_ACL=stripes.
func TestACLRuleIsTheDocumentedOne(t *testing.T) {
	rule := ACLRule("<prefix>")
	slices.Sort(rule)
	require.Equal(t, docRule(t), rule)
	require.Equal(t, "~"+DefaultPrefix+"*", ACLRule("")[0])
}
