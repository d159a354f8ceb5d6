package l1cache

import "strings"

// An invalidation message is one of
//
//	"1 k <instance-id> <key>"  drop key
//	"1 a <instance-id>"        drop every key
//
// The key is the rest of the message, so it may hold any byte.
const msgVersion = "1 "

func keyMessage(id, key string) string { return msgVersion + "k " + id + " " + key }

func allMessage(id string) string { return msgVersion + "a " + id }

// parseMessage splits a message into its kind ('k' or 'a'), sender and key.
func parseMessage(m string) (kind byte, id, key string, ok bool) {
	rest, found := strings.CutPrefix(m, msgVersion)
	if !found || len(rest) < 3 || rest[1] != ' ' {
		return 0, "", "", false
	}
	kind, rest = rest[0], rest[2:]
	switch kind {
	case 'k':
		id, key, found = strings.Cut(rest, " ")
		return kind, id, key, found && validInstanceID(id)
	case 'a':
		return kind, rest, "", validInstanceID(rest)
	}
	return 0, "", "", false
}
