package script_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	// headerEntry matches one entry of a header's KEYS or ARGV section: "-- KEYS[2]  meaning"
	// or, for a variable tail, "-- ARGV[6..]  meaning".
	headerEntry = regexp.MustCompile(`^-- (KEYS|ARGV)\[([0-9]+)(\.\.)?\]\s+\S`)
	// headerNone matches a section without entries: "-- ARGV  none" (or "none of its own").
	headerNone = regexp.MustCompile(`^-- (KEYS|ARGV)  none\b`)
	// headerStart matches any line that opens a KEYS or ARGV section, in any format.
	headerStart = regexp.MustCompile(`^-- ?(KEYS|ARGV)\b`)
	// bodyIndex matches a literal index into KEYS or ARGV in a script's code.
	bodyIndex = regexp.MustCompile(`\b(KEYS|ARGV)\[([0-9]+)\]`)
	// bodyDynamic matches a read of KEYS or ARGV other than by a literal index: by a
	// computed index (ARGV[i], ARGV[2 * i]) or as a whole table (unpack(KEYS), ipairs(ARGV)).
	// A count (#ARGV) or the length of one entry (#ARGV[1]) reads no entry.
	bodyDynamic = regexp.MustCompile(`\b(KEYS|ARGV)\s*\[\s*([^0-9\s]|[0-9]+\s*[^0-9\s\]])|[(,]\s*(KEYS|ARGV)\s*[,)]`)
	// embedVar matches "//go:embed name.lua" followed by the variable that holds it.
	embedVar = regexp.MustCompile(`//go:embed (\S+\.lua)\s*\n\s*(\w+)\s+string`)
	// prepended matches a script built from a shared fragment followed by its own file.
	prepended = regexp.MustCompile(`script\.New\(\s*(\w+)\s*\+\s*(\w+)\s*\)`)
)

// listing is what a header's KEYS or ARGV section lists: entries 1..fixed, one per line in
// order, and, when tail > 0, a variable tail from index tail on.
type listing struct {
	fixed, tail int
	none        bool
}

func (l listing) covers(i int) bool { return i <= l.fixed || (l.tail > 0 && i >= l.tail) }

// parseHeader reads the KEYS and ARGV listings of a script's header comment, requiring the
// one format: one line per index, "-- KEYS[i]  meaning", continuation lines indented, in
// order from 1, or "-- KEYS  none".
func parseHeader(t *testing.T, src string) map[string]listing {
	t.Helper()
	got := map[string]listing{}
	for _, line := range strings.Split(src, "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		if m := headerNone.FindStringSubmatch(line); m != nil {
			l := got[m[1]]
			require.Zero(t, l.fixed+l.tail, "%q: a section that lists entries is not none", line)
			got[m[1]] = listing{none: true}
			continue
		}
		m := headerEntry.FindStringSubmatch(line)
		if m == nil {
			require.False(t, headerStart.MatchString(line),
				"%q: list keys and arguments one per line, as \"-- KEYS[1]  meaning\"", line)
			continue
		}
		l := got[m[1]]
		require.False(t, l.none, "%q: the section said none", line)
		require.Zero(t, l.tail, "%q: entries after the variable tail", line)
		i, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		require.Equal(t, l.fixed+1, i, "%q: entries are listed in order, from 1, one per line", line)
		if m[3] != "" {
			l.tail = i
		} else {
			l.fixed = i
		}
		got[m[1]] = l
	}
	return got
}

// code returns a script's lines without comment lines.
func code(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// fragments maps each script that its package builds from a shared fragment followed by its
// own file (escrow's step.lua, replicas' registry.lua) to that fragment, read from the Go
// files that embed them.
func fragments(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	byVar := map[string]string{}
	var src []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src = append(src, string(b))
		for _, m := range embedVar.FindAllStringSubmatch(string(b), -1) {
			byVar[m[2]] = filepath.Join(dir, m[1])
		}
	}
	out := map[string]string{}
	for _, s := range src {
		for _, m := range prepended.FindAllStringSubmatch(s, -1) {
			frag, own := byVar[m[1]], byVar[m[2]]
			require.NotEmpty(t, frag, "%s: unknown fragment %s", dir, m[1])
			require.NotEmpty(t, own, "%s: unknown script %s", dir, m[2])
			out[own] = frag
		}
	}
	return out
}

// TestEveryScriptListsTheKeysAndArgumentsItUses: every script's header lists its keys and
// arguments in the one format (see parseHeader), and the list matches the code: every
// KEYS[i] and ARGV[i] the code reads (with the shared fragment its package prepends) is
// listed, and every listed one is read, unless the code also reads the table another way
// (a computed index, unpack(KEYS)), where the test cannot tell which it reads.
func TestEveryScriptListsTheKeysAndArgumentsItUses(t *testing.T) {
	root := filepath.Join("..", "..")
	dirs := map[string]bool{}
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
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	frag := map[string]string{}
	for dir := range dirs {
		for own, f := range fragments(t, dir) {
			frag[own] = f
		}
	}
	for _, path := range scripts {
		t.Run(path, func(t *testing.T) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			head := parseHeader(t, string(b))
			body := code(string(b))
			if f, ok := frag[path]; ok {
				fb, err := os.ReadFile(f)
				require.NoError(t, err)
				body = code(string(fb)) + body
			}
			for _, table := range []string{"KEYS", "ARGV"} {
				l, ok := head[table]
				require.True(t, ok, "the header has no %s section in the one format", table)
				used := map[int]bool{}
				for _, m := range bodyIndex.FindAllStringSubmatch(body, -1) {
					if m[1] != table {
						continue
					}
					i, err := strconv.Atoi(m[2])
					require.NoError(t, err)
					used[i] = true
					require.True(t, l.covers(i), "the code reads %s[%d]; the header does not list it", table, i)
				}
				dynamic := false
				for _, m := range bodyDynamic.FindAllStringSubmatch(body, -1) {
					if m[1] == table || m[3] == table {
						dynamic = true
					}
				}
				if dynamic {
					continue
				}
				for i := 1; i <= l.fixed; i++ {
					require.True(t, used[i], "the header lists %s[%d]; the code never reads it", table, i)
				}
				require.Zero(t, l.tail, "the header lists %s[%d..]; the code never reads past the fixed entries", table, l.tail)
			}
		})
	}
}
