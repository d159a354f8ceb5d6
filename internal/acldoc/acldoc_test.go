package acldoc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRuleReadsTheACLSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.go")
	doc := "// Package x.\n//\n// # ACL\n//\n// The user needs \"~<prefix>* +eval +get\",\n// and +get again, plus %R~ro:* (read only).\n//\n// # Next\n//\n// +set is not in the section.\npackage x\n"
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	rule, err := Rule(path)
	require.NoError(t, err)
	require.Equal(t, []string{"%R~ro:*", "+eval", "+get", "~<prefix>*"}, rule)

	require.NoError(t, os.WriteFile(path, []byte("// Package x.\npackage x\n"), 0o600))
	_, err = Rule(path)
	require.ErrorContains(t, err, "no \"# ACL\" section")
}
