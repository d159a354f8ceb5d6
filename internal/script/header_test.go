package script_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// headerSection matches the start of a section of a script's header comment.
var headerSection = regexp.MustCompile(`^--\s*(KEYS|ARGV|Reply|Invariant)\b`)

// TestEveryScriptHasTheHeaderSections: every Lua script of the module opens with a comment
// header holding the sections KEYS, ARGV, Reply and Invariant, in that order (a shared
// fragment such as escrow's step.lua says "none of its own" where it has none).
func TestEveryScriptHasTheHeaderSections(t *testing.T) {
	root := filepath.Join("..", "..")
	var scripts []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".lua") {
			scripts = append(scripts, path)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	for _, path := range scripts {
		t.Run(path, func(t *testing.T) {
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			var got []string
			sc := bufio.NewScanner(f)
			for sc.Scan() && strings.HasPrefix(sc.Text(), "--") {
				m := headerSection.FindStringSubmatch(sc.Text())
				if m != nil && (len(got) == 0 || got[len(got)-1] != m[1]) {
					got = append(got, m[1])
				}
			}
			require.NoError(t, sc.Err())
			require.Equal(t, []string{"KEYS", "ARGV", "Reply", "Invariant"}, got)
		})
	}
}
