package natstransport

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// onMessage is the callback of every election subject. It never blocks.
func (a *Adapter) onMessage(msg *nats.Msg) {
	if a.stopping.Load() {
		return
	}
	m, err := a.check(msg)
	a.take(m, err, msg.Subject)
}

// onBatched takes one message of a batch (protocol.ReadBatch) that the
// Shared connection received on subject, signed by signer if the batch
// was checked against keys, every message of which is addressed to
// member to (0: broadcasts). It never blocks.
func (a *Adapter) onBatched(data []byte, signer, to uint64, subject string) {
	if a.stopping.Load() {
		return
	}
	m, err := a.checkBatched(data, signer, to)
	a.take(m, err, subject)
}

// take queues m, checked with the outcome err, for the machine, or
// drops it, counting why.
func (a *Adapter) take(m protocol.Message, err error, subject string) {
	if errors.Is(err, errOrdersEvidence) {
		return
	}
	if err != nil {
		reason := protocol.ReasonOf(err)
		if reason == protocol.ReasonExpired {
			a.warnExpired(err)
		}
		a.drop(reason, subject, err)
		return
	}
	if !a.senders.admit(m.From, transport.Claim(m), a.memberCount(), time.Now()) {
		a.drop(ReasonSenderLimit, subject, nil)
		return
	}
	if a.lanes.Deliver(transport.Inbound{Kind: transport.Message, Msg: m, At: time.Now()}) && transport.Claim(m) && a.claimer.Load() != m.From {
		a.claimer.Store(m.From)
	}
}

// check runs every check on a received message, cheapest first, and
// returns it decoded.
func (a *Adapter) check(msg *nats.Msg) (protocol.Message, error) {
	if len(msg.Data) > a.cfg.MaxPayload {
		return protocol.Message{}, &protocol.ValidationError{Reason: protocol.ReasonOversized, Detail: strconv.Itoa(len(msg.Data)) + " bytes"}
	}
	var signer uint64
	if a.cfg.Keys != nil {
		var err error
		a.cfg.Meter.SignatureChecked()
		if signer, err = a.cfg.Keys.Verify(msg.Subject, msg.Data, msg.Header); err != nil {
			return protocol.Message{}, err
		}
	}
	m, err := protocol.Decode(msg.Data)
	if err != nil {
		return m, err
	}
	return a.checkDecoded(msg.Subject, m, signer)
}

// checkBatched runs check's checks on a message of a batch, whose
// signature (by signer) the Shared connection checked: a batch carries
// only broadcasts (to 0) or only messages addressed to member to, each
// taken as if it had arrived on its own subject.
func (a *Adapter) checkBatched(data []byte, signer, to uint64) (protocol.Message, error) {
	if len(data) > a.cfg.MaxPayload {
		return protocol.Message{}, &protocol.ValidationError{Reason: protocol.ReasonOversized, Detail: strconv.Itoa(len(data)) + " bytes"}
	}
	m, err := protocol.Decode(data)
	if err != nil {
		return m, err
	}
	switch {
	case m.To != to && to == 0:
		return m, &protocol.ValidationError{Reason: protocol.ReasonWrongSubject, Detail: "a point-to-point message in a batch of broadcasts"}
	case m.To != to:
		return m, &protocol.ValidationError{Reason: protocol.ReasonWrongSubject, Detail: fmt.Sprintf("a message to %d in a batch to %d", m.To, to)}
	}
	return a.checkDecoded(protocol.SubjectFor(a.cfg.Cluster, m), m, signer)
}

// checkDecoded runs the checks that follow the signature's and the
// decoding, m having arrived on subject.
func (a *Adapter) checkDecoded(subject string, m protocol.Message, signer uint64) (protocol.Message, error) {
	if a.cfg.Keys != nil {
		if err := signing.CheckSigner(signer, m.From); err != nil {
			return m, err
		}
	}
	if err := protocol.CheckRoute(a.cfg.Cluster, subject, m); err != nil {
		return m, err
	}
	if err := protocol.ValidateFor(m, a.isMember); err != nil {
		return m, err
	}
	if err := protocol.CheckAddressee(m, a.self.Incarnation, a.self.Started); err != nil {
		return m, err
	}
	if m.Type == protocol.TypeBzEvidence && m.Inc == 0 && m.N == 0 && m.TS == 0 {
		return m, errOrdersEvidence
	}
	return m, a.guard.Check(m, a.cfg.Now())
}

// errOrdersEvidence marks evidence published by a member's orders service
// (pkg/orders): signed with the member's key, but without the freshness
// fields of the node's own messages, whose numbering it does not share.
// It is for the observer; the node leaves it alone and does not count it
// as invalid.
var errOrdersEvidence = errors.New("natstransport: evidence of the orders, for the observer")

// warnExpired logs, at most once a minute, that messages arrive outside
// MaxMessageAge: replays, or clocks that disagree.
func (a *Adapter) warnExpired(err error) {
	now := a.cfg.Now().UnixMilli()
	last := a.lastExpiredWarning.Load()
	if now-last < time.Minute.Milliseconds() || !a.lastExpiredWarning.CompareAndSwap(last, now) {
		return
	}
	a.log.Warn("dropping messages dated outside the accepted age: replayed messages, or clocks that disagree by more than it", "max_age", a.cfg.MaxMessageAge, "err", err)
}

// onReply handles the server's answer to a point-to-point message: only a
// "no responders" status is expected, meaning the receiver is gone. The
// reply subject is <inbox>.<peer>.<number>; it counts only if this node
// sent that message within the last replyWindow and heard no status for
// it before.
func (a *Adapter) onReply(msg *nats.Msg) {
	if a.stopping.Load() || msg.Header.Get("Status") != "503" {
		return
	}
	if _, ok := a.replies.take(msg.Subject, a.cfg.Now()); !ok {
		a.log.Debug("no-responders status for no message of ours", "subject", msg.Subject)
		return
	}
	if peer, ok := replyPeer(msg.Subject, a.replyTo); ok {
		a.unreachable(peer)
	}
}

// unreachable tells the machine that a point-to-point message to peer
// found no receiver.
func (a *Adapter) unreachable(peer uint64) {
	if a.stopping.Load() {
		return
	}
	a.lanes.Deliver(transport.Inbound{Kind: transport.Unreachable, Peer: peer, At: time.Now()})
}

// onQuery answers a request for the leader with the node's announcement,
// while it leads: for an algorithm with leases, only while the lease
// holds on the monotonic clock. The adapter subscribes to the query
// subject only while the node leads; the check here covers the moment
// between stepping down and unsubscribing.
func (a *Adapter) onQuery(msg *nats.Msg) {
	if msg.Reply == "" || a.stopping.Load() {
		return
	}
	if !inboxReply(msg.Reply) {
		a.drop(ReasonReplyNotInbox, msg.Subject, nil)
		return
	}
	ans := a.answer.Load()
	if ans == nil || (!ans.until.IsZero() && !time.Now().Before(ans.until)) {
		return
	}
	if err := a.nc.PublishMsg(&nats.Msg{Subject: msg.Reply, Data: ans.data, Header: ans.header}); err != nil {
		a.log.Warn("answer query", "err", err)
	}
}

// drop counts and logs a message that does not reach the machine.
func (a *Adapter) drop(reason protocol.Reason, subject string, err error) {
	a.lanes.Drop(reason)
	a.log.Debug("message dropped", "reason", reason, "subject", subject, "err", err)
}

// replies are the point-to-point messages (or, on a Shared connection,
// their batches) sent recently, by reply subject, each with what its
// status concerns (V), so that a "no responders" status counts only for
// one of them, once.
type replies[V any] struct {
	mu   sync.Mutex
	sent map[string]sentReply[V]
}

type sentReply[V any] struct {
	at time.Time
	of V
}

// replyWindow is how long a point-to-point message's "no responders"
// status is awaited.
const replyWindow = time.Second

// maxReplies bounds the reply subjects remembered; beyond it the oldest
// half-window is forgotten.
const maxReplies = 4096

func (r *replies[V]) add(subject string, of V, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent == nil {
		r.sent = make(map[string]sentReply[V])
	}
	if len(r.sent) >= maxReplies {
		for s, sr := range r.sent {
			if now.Sub(sr.at) > replyWindow/2 {
				delete(r.sent, s)
			}
		}
	}
	if len(r.sent) < maxReplies {
		r.sent[subject] = sentReply[V]{now, of}
	}
}

// take reports whether subject is the reply subject of a message sent in
// the last replyWindow, with what it concerns, and forgets it.
func (r *replies[V]) take(subject string, now time.Time) (V, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sr, ok := r.sent[subject]
	delete(r.sent, subject)
	return sr.of, ok && now.Sub(sr.at) <= replyWindow
}

// replyPeer is the member that a reply subject <prefix>.<peer>.<n> names.
func replyPeer(subject, prefix string) (uint64, bool) {
	token, _, _ := strings.Cut(strings.TrimPrefix(subject, prefix+"."), ".")
	peer, err := strconv.ParseUint(token, 10, 64)
	return peer, err == nil
}

// dynamicShareMembers is the membership size that each sender's share of
// the lanes is counted for with dynamic membership, where the size
// changes: the shares of a static cluster of that many members.
const dynamicShareMembers = 32

// memberCount is the membership size the senders' shares are counted for.
func (a *Adapter) memberCount() int {
	if a.cfg.Dynamic {
		return max(dynamicShareMembers, len(a.cfg.Members))
	}
	return len(a.cfg.Members)
}
