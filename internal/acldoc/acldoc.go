// Package acldoc reads the ACL rule a package's doc.go states, so that a package's test can
// hold its exported ACLRule function to its documentation.
package acldoc

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Rule returns the key patterns, channel patterns and commands (the words starting with
// '~', '%', '&' or '+') that the "# ACL" section of the Go file at path names, sorted and
// without repeats.
func Rule(path string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, section, ok := strings.Cut(string(src), "// # ACL\n")
	if !ok {
		return nil, fmt.Errorf("acldoc: %s has no \"# ACL\" section", path)
	}
	section, _, _ = strings.Cut(section, "// # ")
	var out []string
	for _, w := range strings.Fields(strings.ReplaceAll(section, "//", " ")) {
		w = strings.Trim(w, `"',.:;()`)
		if len(w) > 1 && strings.ContainsRune("+~%&", rune(w[0])) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
