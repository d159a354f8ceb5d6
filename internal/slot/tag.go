package slot

import "strings"

// HasBraces reports whether s holds '{' or '}'. A key prefix or a name that becomes part of
// a hash tag must not: a brace would move the key's tag, and with it the key's slot.
func HasBraces(s string) bool {
	return strings.ContainsAny(s, "{}")
}

// Tagged returns prefix + "{" + tag + "}": the start of a key whose slot is tag's, so that
// every key built on it, Tagged(prefix, tag) + anything, lands in the same slot. The caller
// has checked that prefix has no braces (HasBraces) and that tag holds no '}'.
func Tagged(prefix, tag string) string {
	return prefix + "{" + tag + "}"
}
