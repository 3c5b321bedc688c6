package node

import (
	"time"

	"github.com/baton-election/baton/pkg/certify"
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
		if err := n.writeState(stored{HardState: *rd.State, Incarnation: n.drv.Incarnation()}); err != nil {
			return err
		}
	}
	for _, m := range rd.Stale {
		n.log.Debug("not sent, out of date after a stall", "msg", m)
	}
	for _, ev := range rd.Events {
		n.record(ev)
	}
	if rd.Claimed != 0 {
		n.current, n.currentAnnounced = n.announcement(rd.Claimed), false
	}
	n.show(rd.Status)
	for _, m := range rd.Messages {
		n.log.Debug("send", "msg", m)
		if err := n.tr.Send(m); err != nil {
			n.log.Warn("send", "msg", m, "err", err)
			continue
		}
		n.metrics.sent.WithLabelValues(string(m.Type)).Inc()
	}
	if n.current != nil && !n.currentAnnounced && n.view.Load().leadingAt(time.Now()) == n.current {
		// Announce once the status shows the leadership, so whoever hears
		// the announcement finds it in /status and in queries; never with
		// a lease that has already ended. A claim whose lease ended before
		// it could be announced is announced when the lease is won again
		// in the same term (byzantine: a leader keeps its term when a
		// quorum's acks lapse and come back).
		n.currentAnnounced = true
		n.tr.Announce(*n.current)
	}
	if rd.Claimed != 0 {
		n.alignGrid()
	}
	return nil
}

// alignGrid puts the machine's ticks back on the grid of its quiet
// heartbeats (election.Timing.QuietGrid, which begin set on the ticks
// counted from the Unix epoch) as it claims: a hold's release shifted its
// clock by the time it did not count (offset), which need not be whole
// grid intervals, and its quiet heartbeats would come due apart from the
// other elections'. Its clock pauses for less than a grid interval
// instead: its next heartbeat comes that much later, well within its
// followers' time-out.
func (n *Node) alignGrid() {
	g := n.cfg.Election.Timing.QuietGrid
	if g == 0 || n.offset <= 0 {
		return
	}
	step := time.Duration(g) * n.cfg.Tick
	n.offset = (n.offset + step - 1) / step * step
}

// show publishes the machine's status to /status, the metrics, the query
// responder and the callbacks, as one value (setView): the leadership and
// its lease together.
func (n *Node) show(st election.SoftState) {
	var until time.Time
	if st.Role == election.Leader && st.LeaseUntil != 0 && n.drv != nil {
		until = n.realAt(st.LeaseUntil)
	}
	// What queries are answered with: this node's announcement, while it
	// leads under that announcement's term.
	var leading *protocol.Announcement
	if n.current != nil && st.Role == election.Leader && st.Term == n.current.Term {
		leading = n.current
		n.leadership.begin(n.current)
	} else {
		n.leadership.end()
	}
	n.setView(st, until, leading, true) // it wakes the watchers
	n.tr.Lead(leading, until)
	n.metrics.term.Set(float64(st.Term))
}

// record turns one event of the machine into logs and metrics.
func (n *Node) record(ev election.Event) {
	switch ev.Kind {
	case election.ElectionStarted:
		n.metrics.electionsStarted.Inc()
		n.log.Debug("election started")
	case election.LeaderTimedOut:
		n.metrics.leaderTimeouts.Inc()
		n.suspected(ev.Kind, ev.Leader, ev.Term)
	case election.LeaderDisconnected:
		n.metrics.leaderDisconnects.Inc()
		n.suspected(ev.Kind, ev.Leader, ev.Term)
	case election.LeaderChanged:
		n.metrics.leaderChanges.Inc()
		n.log.Info("leader", "leader", ev.Leader, "term", ev.Term)
		n.leaderChanged(ev.Leader, ev.Term)
	case election.SteppedDown:
		n.metrics.steppedDown.Inc()
		// A leader that gives up its lease may be late itself: its lags,
		// its pending events, and when it last heard each member.
		now := time.Now()
		n.log.Info("stepped down", append([]any{"term", ev.Term, n.peersHeard(now)}, n.evidence(now)...)...)
	case election.LeaderProbed:
		n.metrics.probes.WithLabelValues(probeSent).Inc()
		now := time.Now()
		attrs := []any{"leader", ev.Leader, "term", ev.Term}
		if ago, heard := n.health.heardAgo(ev.Leader, now); heard {
			attrs = append(attrs, "heard_ago", ago)
		}
		n.log.Info("leader silent: asked it before suspecting it", append(attrs, n.evidence(now)...)...)
	case election.ProbeAnswered:
		n.metrics.probes.WithLabelValues(probeAnswered).Inc()
		n.log.Info("leader heard again: nobody suspected", "leader", ev.Leader, "term", ev.Term)
	case election.LeaderResumed:
		n.metrics.resumed.Inc()
		n.log.Info("leading again in the same term", "term", ev.Term)
	case election.MemberJoined:
		n.metrics.membership.WithLabelValues("joined").Inc()
		n.log.Info("member joined", "member", ev.Member, "members", n.currentMembers())
	case election.MemberLeft:
		n.metrics.membership.WithLabelValues("left").Inc()
		n.log.Info("member left", "member", ev.Member, "members", n.currentMembers())
	case election.MemberLied:
		n.metrics.membersLied.Inc()
		n.log.Warn("member lied: it signed two contradicting statements", "member", ev.Member, "term", ev.Term)
	}
}

// announcement is this node's leadership with term.
// stepper is a machine whose member set changes (byzantine with dynamic
// membership): its announcements carry the last changes.
type stepper interface {
	Steps() []certify.Step
}

func (n *Node) announcement(term uint64) *protocol.Announcement {
	a := &protocol.Announcement{
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
		if s, ok := n.certifier.(stepper); ok && a.Certificate != nil && a.Certificate.Version > 0 {
			// Its readers follow the member set to the certificate's.
			steps := s.Steps()
			a.Steps = steps[max(0, len(steps)-protocol.MaxAnnouncedSteps):]
		}
	}
	return a
}

// writeState stores st, timing the write (with its fsyncs) for the
// metrics and the evidence of suspicions.
func (n *Node) writeState(st stored) error {
	began := time.Now()
	err := n.store.write(st)
	now := time.Now()
	took := now.Sub(began)
	n.metrics.stateWrite.Observe(took.Seconds())
	n.health.stateWrite.note(now, took)
	return err
}
