package hotkeys_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/hotkeys"
)

// TestACLRuleIsTheDocumentedOne proves the rule doc.go states is the one ACLRule returns,
// which the package's tests run under with CELEBRITYTEST_ACL=hotkeys.
func TestACLRuleIsTheDocumentedOne(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(strings.ReplaceAll(string(src), "//", " ")), " ")
	require.Contains(t, doc, `"`+strings.Join(hotkeys.ACLRule(hotkeys.ScanOptions{Match: "<pattern>"}), " ")+`"`)
}
