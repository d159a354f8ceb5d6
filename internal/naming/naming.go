// Package naming turns Go identifiers into the snake_case names the library shows to
// operators: the admin handler's and the CLI's JSON keys, and the metrics adapters' names.
package naming

import (
	"strings"
	"unicode"
)

// Snake returns a Go identifier in snake_case: "StaleIfErrorHits" is "stale_if_error_hits",
// an initialism stays one word ("HTTPServer" is "http_server"), and so does its plural
// ("DuplicateInstanceIDs" is "duplicate_instance_ids"); a digit stays with the word before
// it ("L1Hits" is "l1_hits").
func Snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]) || startsWord(r, i)) {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// startsWord tells whether the upper-case r[i], which follows an upper-case letter, starts
// a word: it does when a lower-case letter follows it, unless that letter is the plural "s"
// of an initialism ("IDs", "URLs") ending the identifier or followed by the next word.
func startsWord(r []rune, i int) bool {
	if i+1 >= len(r) || !unicode.IsLower(r[i+1]) {
		return false
	}
	plural := r[i+1] == 's' && (i+2 == len(r) || !unicode.IsLower(r[i+2]))
	return !plural
}
