package natstransport

import (
	"strings"

	"github.com/baton-election/baton/pkg/protocol"
)

// ReasonReplyNotInbox is the drop reason of a query whose reply subject is
// not an inbox: the leader answers only on the requester's inbox, never
// on a subject others read, where its answer, carrying its signature and
// published with the node's rights, would pass for something it did not
// send (a request with the reply subject election.<cluster>.leader would
// have it announce again, out of order, in the position starting nodes
// and applications read).
const ReasonReplyNotInbox protocol.Reason = "reply_not_inbox"

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
