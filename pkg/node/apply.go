package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// commit carries out what the driver says the machine wants done since
// the last commit (driver.Ready), in its order: store the hard state; show
// the new status (so that a node that stops leading stops saying so
// before its messages leave, and one that starts says so before it
// announces); send the messages; announce a claim. It returns an error
// only if the state could not be stored; then nothing of the batch has
// left the process.
func (n *Node) commit() error {
	rd := n.drv.Ready(n.cfg.Now())
	if rd.State != nil {
		if err := n.store.write(stored{HardState: *rd.State, Incarnation: n.drv.Incarnation()}); err != nil {
			return err
		}
	}
	for _, m := range rd.Stale {
		n.log.Debug("not sent, out of date after a stall", "msg", m)
	}
	for _, ev := range rd.Events {
		n.record(ev)
	}
	st := rd.Status
	if rd.Claimed != 0 {
		n.current, n.currentAnnounced = n.announcement(rd.Claimed), false
	}
	n.show(st)
	for _, m := range rd.Messages {
		n.log.Debug("send", "msg", m)
		n.publish(m)
	}
	if n.current != nil && !n.currentAnnounced && n.leadingNow() == n.current {
		// Announce once the status shows the leadership, so whoever hears
		// the announcement finds it in /status and in queries; never with
		// a lease that has already ended. A claim whose lease ended before
		// it could be announced is announced when the lease is won again
		// in the same term (byzantine: a leader keeps its term when a
		// quorum's acks lapse and come back).
		n.currentAnnounced = true
		n.announce(n.current)
	}
	n.answerQueries(st.Role == election.Leader)
	return nil
}

// show publishes the machine's status to /status, the metrics, the query
// responder and the callbacks, as one value (setView): the leadership and
// its lease together.
func (n *Node) show(st election.Status) {
	var until time.Time
	if st.Role == election.Leader && st.LeaseUntil != 0 && n.drv != nil {
		until = n.drv.At(st.LeaseUntil)
	}
	// What queries are answered with: this node's announcement, while it
	// leads under that announcement's term.
	var leading *announcement
	if n.current != nil && st.Role == election.Leader && st.Term == n.current.term {
		leading = n.current
		n.leadership.begin(n.current)
	} else {
		n.leadership.end()
	}
	n.setView(st, until, leading) // last: it wakes the watchers
	n.metrics.term.Set(float64(st.Term))
}

// leadingNow returns this node's announcement if it leads now: for an
// algorithm with leases, only while the lease holds on the monotonic
// clock, whatever the machine last said (a node resumed from a pause
// must not act on a lease that ended meanwhile).
func (n *Node) leadingNow() *announcement {
	return n.view.Load().leadingAt(time.Now())
}

// record turns one event of the machine into logs and metrics.
func (n *Node) record(ev election.Event) {
	switch ev.Kind {
	case election.ElectionStarted:
		n.metrics.electionsStarted.Inc()
		n.log.Debug("election started")
	case election.LeaderTimedOut:
		n.metrics.leaderTimeouts.Inc()
		n.log.Info("leader timed out", "leader", ev.Leader, "term", ev.Term)
	case election.LeaderDisconnected:
		n.metrics.leaderDisconnects.Inc()
		n.log.Info("leader's connection closed", "leader", ev.Leader, "term", ev.Term)
	case election.LeaderChanged:
		n.metrics.leaderChanges.Inc()
		n.log.Info("leader", "leader", ev.Leader, "term", ev.Term)
	case election.SteppedDown:
		n.metrics.steppedDown.Inc()
		n.log.Info("stepped down", "term", ev.Term)
	case election.MemberLied:
		n.metrics.membersLied.Inc()
		n.log.Warn("member lied: it signed two contradicting statements", "member", ev.Member, "term", ev.Term)
	}
}

// answerQueries subscribes to the query subject while the node leads, and
// unsubscribes when it stops, so that a request while no node leads fails
// at once with "no responders" instead of waiting its whole time-out.
func (n *Node) answerQueries(leading bool) {
	switch {
	case leading && n.querySub == nil && !n.stopping.Load():
		sub, err := n.nc.Subscribe(protocol.QuerySubject(n.cfg.Cluster), n.cfg.PendingMsgs, n.cfg.PendingBytes, n.onQuery)
		if err != nil {
			n.log.Warn("subscribe to queries", "err", err)
			return
		}
		n.querySub = sub
	case !leading && n.querySub != nil:
		if err := n.querySub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			n.log.Warn("unsubscribe from queries", "err", err)
		}
		n.querySub = nil
	}
}

// publish sends one message of the machine, stamped by the driver, and
// signed with the node's key when it has one.
func (n *Node) publish(m protocol.Message) {
	now := n.cfg.Now()
	if m.To != 0 {
		m.ToInc = n.guard.Incarnation(m.To)
	}
	data, err := protocol.Encode(m)
	if err != nil {
		n.log.Error("encode", "msg", m, "err", err)
		return
	}
	out := &nats.Msg{Subject: protocol.SubjectFor(n.cfg.Cluster, m), Data: data}
	if n.cfg.Signer != nil {
		out.Header = n.cfg.Signer.Header(out.Subject, data)
	}
	if m.To != 0 && n.replyTo != "" {
		out.Reply = n.replyTo + "." + strconv.FormatUint(m.To, 10) + "." + strconv.FormatUint(m.N, 10)
		n.replies.add(out.Reply, now)
	}
	if err := n.nc.Publish(out); err != nil {
		n.log.Warn("publish", "msg", m, "err", err)
		return
	}
	n.metrics.sent.WithLabelValues(string(m.Type)).Inc()
}

// announcement encodes (and signs, with a key) this node's leadership
// with term.
func (n *Node) announcement(term uint64) *announcement {
	a := protocol.Announcement{
		Cluster:   n.cfg.Cluster,
		Leader:    n.id,
		Term:      term,
		Algorithm: n.cfg.Algorithm,
		At:        protocol.Timestamp{Time: n.cfg.Now().UTC()},
	}
	if n.certifier != nil {
		// A byzantine machine claims only with the certificate of its
		// term in hand.
		if cert, ok := n.certifier.Certificate(); ok && cert.Term == term && cert.Leader == n.id {
			a.Certificate = &cert
		}
	}
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		panic(fmt.Sprintf("node: encode announcement: %v", err)) // a struct of strings and numbers
	}
	out := &announcement{term: term, data: data}
	if n.cfg.Signer != nil {
		out.header = n.cfg.Signer.SignAnnouncement(n.cfg.Cluster, data)
	}
	return out
}

// announce publishes a leadership of this node on the leader subject.
func (n *Node) announce(a *announcement) {
	out := &nats.Msg{Subject: protocol.LeaderSubject(n.cfg.Cluster), Data: a.data, Header: a.header}
	if err := n.nc.Publish(out); err != nil {
		n.log.Warn("publish announcement", "term", a.term, "err", err)
		return
	}
	n.log.Info("announced leadership", "term", a.term)
}

// learn asks the cluster for its current leader and the newest term it
// knows of (Transport.Learn), within LearnTimeout; with member keys, only
// announcements signed by the leader they name count.
func (n *Node) learn(ctx context.Context) Learned {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.LearnTimeout)
	defer cancel()
	l, err := n.nc.Learn(ctx, n.cfg.Cluster, n.cfg.Keys)
	if err != nil {
		n.log.Debug("learning the cluster's leader and term", "learned", l, "err", err)
	}
	return l
}
