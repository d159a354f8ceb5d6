package l1cache

import "strings"

// An invalidation message is one of
//
//	"2 k <instance-id> <nonce> <key>"  drop key
//	"2 a <instance-id> <nonce>"        drop every key
//
// The nonce is drawn at random by each Invalidator, so two instances configured with the
// same InstanceID still tell their messages apart. The key is the rest of the message, so it
// may hold any byte. Messages of version 1 ("1 k <instance-id> <key>", "1 a <instance-id>"),
// sent by earlier releases, are still understood; they carry no nonce.
const (
	msgVersion   = "2 "
	msgVersionV1 = "1 "
)

func keyMessage(id, nonce, key string) string {
	return msgVersion + "k " + id + " " + nonce + " " + key
}

func allMessage(id, nonce string) string { return msgVersion + "a " + id + " " + nonce }

// message is a parsed invalidation message.
type message struct {
	kind      byte // 'k' or 'a'
	id, nonce string
	key       string
}

// parseMessage parses a message of version 2 or 1.
func parseMessage(m string) (message, bool) {
	if rest, ok := strings.CutPrefix(m, msgVersion); ok {
		return parseBody(rest, true)
	}
	if rest, ok := strings.CutPrefix(m, msgVersionV1); ok {
		return parseBody(rest, false)
	}
	return message{}, false
}

// parseBody parses what follows the version: the kind, the sender (and its nonce in
// version 2) and, for 'k', the key.
func parseBody(rest string, nonce bool) (message, bool) {
	if len(rest) < 3 || rest[1] != ' ' || (rest[0] != 'k' && rest[0] != 'a') {
		return message{}, false
	}
	msg := message{kind: rest[0]}
	rest = rest[2:]
	fields := 1 // the instance ID
	if nonce {
		fields++
	}
	if msg.kind == 'k' {
		fields++ // the key, which may contain spaces: it is the rest
	}
	parts := strings.SplitN(rest, " ", fields)
	if len(parts) != fields {
		return message{}, false
	}
	msg.id = parts[0]
	if nonce {
		msg.nonce = parts[1]
		if !validInstanceID(msg.nonce) {
			return message{}, false
		}
	}
	if msg.kind == 'k' {
		msg.key = parts[fields-1]
	}
	return msg, validInstanceID(msg.id)
}
