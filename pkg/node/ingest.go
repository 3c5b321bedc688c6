package node

import (
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/protocol"
)

// onMessage is the callback of every election subject. It never blocks.
func (n *Node) onMessage(msg *nats.Msg) {
	if n.stopping.Load() {
		return
	}
	m, err := n.check(msg)
	if err != nil {
		reason := protocol.ReasonOf(err)
		if reason == protocol.ReasonExpired {
			n.warnExpired(err)
		}
		n.drop(reason, msg.Subject, err)
		return
	}
	claim := m.Type == protocol.TypeHeartbeat || m.Type == protocol.TypeCoordinator
	if !n.senders.admit(m.From, claim, len(n.members), time.Now()) {
		n.drop(ReasonSenderLimit, msg.Subject, nil)
		return
	}
	queue := n.inbox
	if claim {
		queue = n.claims
	}
	select {
	case queue <- event{msg: m, at: time.Now()}:
		n.metrics.received.WithLabelValues(string(m.Type)).Inc()
	default:
		n.drop(ReasonInboxFull, msg.Subject, nil)
	}
}

// check runs every check on a received message, cheapest first, and
// returns it decoded.
func (n *Node) check(msg *nats.Msg) (protocol.Message, error) {
	if len(msg.Data) > n.maxPayload {
		return protocol.Message{}, &protocol.ValidationError{Reason: protocol.ReasonOversized, Detail: strconv.Itoa(len(msg.Data)) + " bytes"}
	}
	var signer uint64
	if n.cfg.Keys != nil {
		var err error
		if signer, err = n.cfg.Keys.Verify(msg.Subject, msg.Data, msg.Header); err != nil {
			return protocol.Message{}, err
		}
	}
	m, err := protocol.Decode(msg.Data)
	if err != nil {
		return m, err
	}
	if n.cfg.Keys != nil {
		if err := protocol.CheckSigner(signer, m.From); err != nil {
			return m, err
		}
	}
	if err := protocol.CheckRoute(n.cfg.Cluster, msg.Subject, m); err != nil {
		return m, err
	}
	if err := protocol.Validate(m, n.members); err != nil {
		return m, err
	}
	if err := protocol.CheckAddressee(m, n.incarnation, n.startedAt); err != nil {
		return m, err
	}
	return m, n.guard.Check(m, n.cfg.Now())
}

// warnExpired logs, at most once a minute, that messages arrive outside
// MaxMessageAge: replays, or clocks that disagree.
func (n *Node) warnExpired(err error) {
	now := n.cfg.Now().UnixMilli()
	last := n.lastExpiredWarning.Load()
	if now-last < time.Minute.Milliseconds() || !n.lastExpiredWarning.CompareAndSwap(last, now) {
		return
	}
	n.log.Warn("dropping messages dated outside the accepted age: replayed messages, or clocks that disagree by more than it", "max_age", n.cfg.MaxMessageAge, "err", err)
}

// onReply handles the server's answer to a point-to-point message: only a
// "no responders" status is expected, meaning the receiver is gone. The
// reply subject is <inbox>.<peer>.<number>; it counts only if this node
// sent that message within the last replyWindow and heard no status for
// it before.
func (n *Node) onReply(msg *nats.Msg) {
	if n.stopping.Load() || msg.Header.Get("Status") != "503" {
		return
	}
	if !n.replies.take(msg.Subject, n.cfg.Now()) {
		n.log.Debug("no-responders status for no message of ours", "subject", msg.Subject)
		return
	}
	rest := strings.TrimPrefix(msg.Subject, n.replyTo+".")
	peerToken, _, _ := strings.Cut(rest, ".")
	peer, err := strconv.ParseUint(peerToken, 10, 64)
	if err != nil {
		return
	}
	select {
	case n.inbox <- event{unreachable: peer, at: time.Now()}:
	default:
		n.drop(ReasonInboxFull, msg.Subject, nil)
	}
}

// onQuery answers a request for the leader. The node subscribes to the
// query subject only while it leads; the check here covers the moment
// between stepping down and unsubscribing.
func (n *Node) onQuery(msg *nats.Msg) {
	if msg.Reply == "" || n.stopping.Load() {
		return
	}
	if !inboxReply(msg.Reply) {
		n.drop(ReasonReplyNotInbox, msg.Subject, nil)
		return
	}
	a := n.leadingNow()
	if a == nil {
		return
	}
	if err := n.nc.Publish(&nats.Msg{Subject: msg.Reply, Data: a.data, Header: a.header}); err != nil {
		n.log.Warn("answer query", "err", err)
	}
}

// drop counts and logs a message that does not reach the machine.
func (n *Node) drop(reason protocol.Reason, subject string, err error) {
	n.metrics.dropped.WithLabelValues(string(reason)).Inc()
	n.log.Debug("message dropped", "reason", reason, "subject", subject, "err", err)
}
