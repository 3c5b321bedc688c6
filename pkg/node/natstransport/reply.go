package natstransport

import (
	"strings"

	"github.com/baton-election/baton/pkg/node/transport"
)

// ReasonReplyNotInbox is transport.ReasonReplyNotInbox.
const ReasonReplyNotInbox = transport.ReasonReplyNotInbox

// maxReplySubject bounds the reply subjects answered; NATS's own inboxes
// are about 30 bytes.
const maxReplySubject = 256

// inboxReply reports whether subject is a requester's inbox, where the
// leader may answer a query: a subject of at least two tokens whose first
// is _INBOX (NATS's default inbox prefix) or starts with _INBOX_ (a
// per-user prefix, nats.CustomInboxPrefix), without wildcards or empty
// tokens, at most maxReplySubject bytes long.
func inboxReply(subject string) bool {
	if len(subject) > maxReplySubject {
		return false
	}
	first, rest, ok := strings.Cut(subject, ".")
	if !ok || (first != "_INBOX" && !strings.HasPrefix(first, "_INBOX_")) {
		return false
	}
	for _, token := range strings.Split(rest, ".") {
		if token == "" || token == "*" || token == ">" || strings.ContainsAny(token, " \t\r\n") {
			return false
		}
	}
	return true
}
