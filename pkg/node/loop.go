package node

import (
	"context"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node/transport"
)

// loop is the node's one goroutine from the machine's start to the end.
//
// It gives the machine its events in the order they happened: before a
// queued message, only the ticks that fell due before the message arrived.
// A node that was descheduled for a while (a loaded machine, a paused
// process) thus handles the answers and claims that arrived meanwhile
// before its own time-outs, as if it had never stalled, instead of timing
// out on messages that are waiting in its queue. A node that reaches a
// deadline late withholds it (advance, withhold).
func (n *Node) loop(ctx context.Context) error {
	if n.epoch.IsZero() {
		n.epoch = n.startOfTicks(time.Now())
	}
	n.drv.Start(n.epoch)
	n.wake = n.realAt(n.drv.Deadline())
	timer := time.NewTimer(n.untilDeadline())
	defer timer.Stop()
	n.log.Info("node started", "algorithm", n.cfg.Algorithm, "members", n.members, "tick", n.cfg.Tick,
		"signed", n.signed(), "incarnation", n.drv.Incarnation())
	if err := n.commit(); err != nil {
		return n.fail(err)
	}
	for {
		in, ok := n.queued()
		if !ok {
			// Nothing waits: catch up with the clock, then sleep until the
			// machine's next deadline or the next event.
			n.advance(time.Now())
			if err := n.commit(); err != nil {
				return n.fail(err)
			}
			timer.Reset(n.untilDeadline())
			select {
			case <-ctx.Done():
				n.shutdown()
				return nil
			case <-n.tr.Closed():
				n.stopped()
				n.log.Warn("connection closed; stopping without resigning")
				n.tr.Abort()
				return ErrConnectionClosed
			case <-timer.C:
				now := time.Now()
				lag := max(0, now.Sub(n.wake))
				n.metrics.timerLag.Observe(lag.Seconds())
				n.health.timerLag.note(now, lag)
				if err := n.settle(); err != nil {
					return n.fail(err)
				}
				continue
			case req := <-n.requests:
				if err := n.changeVoters(req); err != nil {
					return n.fail(err)
				}
				continue
			case <-n.lanes.Ready():
				if in, ok = n.queued(); !ok {
					continue
				}
			}
		}
		// This event and whatever else is queued, up to maxBatch, then one
		// commit: under load, one write of the state serves them all.
		for handled := 1; ; handled++ {
			n.advance(in.At)
			n.handle(in)
			if handled == maxBatch {
				break
			}
			if in, ok = n.queued(); !ok {
				break
			}
		}
		if err := n.commit(); err != nil {
			return n.fail(err)
		}
		if ctx.Err() != nil {
			n.shutdown()
			return nil
		}
	}
}

// startOfTicks is when the machine's tick 0 starts for a loop that starts
// at now. In a group it is the last multiple of the tick (counted from
// the zero time, as the quiet heartbeats' grid is: begin), less than a
// tick before now: the deadlines of the group's elections then fall on
// the same instants, and what they send at them leaves in a few batches,
// not one each (a Paxos leader's lease renewals, every 5 ticks, in at
// most 5 batches per interval and their acknowledgements with them).
// Alone, it is now.
func (n *Node) startOfTicks(now time.Time) time.Time {
	if n.aligned {
		return onTick(now, n.cfg.Tick)
	}
	return now
}

// onTick is the last multiple of tick at or before now (counted from the
// zero time), with now's monotonic clock reading: the machine's clock,
// and the leases measured on it, must not move with the wall clock.
func onTick(now time.Time, tick time.Duration) time.Time {
	return now.Add(-now.Sub(now.Truncate(tick)))
}

// maxBatch bounds the events handled between two commits.
const maxBatch = 64

// settle runs when the machine's next deadline has come with nothing
// queued, before the deadline's ticks are given. A follower or candidate
// first makes sure it has everything the network had delivered to it
// (transport.Settle: the NATS adapter flushes the connection and waits
// until its subscriptions have put on the lanes what the flush brought),
// and hands it to the machine as if it had arrived in time: after every
// tick before the deadline's, which the loop gives next (so a heartbeat
// of a new leader, read there, is not followed at once by the silence it
// ended). On a loaded machine a node is often descheduled past its
// deadline while the leader's heartbeat, or a higher node's Answer, waits
// unread in its socket: without this it would time out a leader that is
// alive, or declare itself while a higher node is alive. Only the order
// is moved, not the time: each message still carries the time it
// arrived, and what is measured from the arrival (a Paxos acceptor's
// grant, election.ArrivalStepper) is measured from there, so a grant
// never ends before the lease argument assumes. A leader's deadlines are
// its own heartbeats and lease; it does not settle for them. A node that
// comes to its deadline late withholds it first (withhold), which
// settles the transport itself.
func (n *Node) settle() error {
	if n.drv.Status().Role == election.Leader {
		return nil
	}
	if withheld := n.held.deadline == 0 && n.withhold(time.Now(), n.drv.Deadline()); !withheld {
		n.tr.Settle() // withhold settles the transport itself
	}
	in, ok := n.queued()
	if !ok {
		return nil
	}
	if n.held.deadline == 0 {
		n.drv.Settle() // the ticks before the deadline's, which the loop slept for
	}
	for ; ok; in, ok = n.queued() {
		n.handle(in)
	}
	return n.commit()
}

// hold is a deadline of the machine that the node withholds because it
// reached it late (withhold).
type hold struct {
	deadline int       // the machine's deadline withheld; 0 if none
	began    time.Time // when the node withheld it
	until    time.Time // when it expires, unless something moves it
	last     int       // the last deadline withheld: none is withheld twice
}

// advance gives the machine every tick that fell due up to t (now, or
// the arrival of the event the loop handles next), unless the node
// withholds the next deadline: it reached it late itself (by more than
// lateTicks ticks), and gives the network one heartbeat interval to
// bring what it would have brought on time (withhold). The hold expires
// with the first event that arrived after its end, or when the loop
// finds nothing queued after it.
func (n *Node) advance(t time.Time) {
	now := time.Now()
	if n.held.deadline != 0 {
		if t.Before(n.held.until) {
			// The machine waits before the deadline's tick, and takes
			// first whatever arrived within the hold, also when the loop
			// is behind and handles it after the hold's end.
			return
		}
		n.release(now, false)
	}
	if d := n.drv.Deadline(); n.drv.TickOf(n.machineTime(t)) >= d {
		if n.withhold(now, d) {
			return
		}
		if st := n.drv.Status(); st.Role != election.Leader {
			// The evidence of a time-out this deadline may bring, as it
			// stands now: later events of the batch must not change it.
			n.health.atDeadline(st.Leader, now)
		}
	}
	n.drv.Advance(n.machineTime(t))
}

// withhold withholds the machine's deadline d if the node reaches it, at
// now, later than the bound, and neither leads nor withheld d before. It
// then gives the machine the ticks before d, settles the transport if
// nothing is queued (what was already delivered to the node is queued),
// and waits one heartbeat
// interval and the bound before it gives d: the events that come in
// meanwhile are handled before d, each with the time it arrived. When
// one of them moves the deadline (the leader's heartbeat, a higher node's
// claim) or changes the leader (a closed connection), the hold ends at
// once (release, see handle). This is
// the runtime's answer to a stalled host: a node whose own timers fired
// late, whose leader was stalled with it, does not time the leader out
// before its next heartbeat could come. A leader never withholds: its
// deadlines are its own heartbeats and lease. It reports whether it
// withheld d.
func (n *Node) withhold(now time.Time, d int) bool {
	if d == n.held.last || !n.held.began.IsZero() && n.realAt(d).Before(n.held.began) {
		// Its lateness is known: it was withheld, or it fell due within
		// the stall that the last hold answered (with leases the
		// machine's clock catches up after the hold, and its next
		// deadlines of that stall come late again; holding each would
		// hold the machine for the stall over and over).
		return false
	}
	if n.drv.Status().Role == election.Leader {
		return false
	}
	late := max(0, now.Sub(n.realAt(d)))
	if late <= n.lateBound() {
		if n.health.deadlineLate.max(now) <= n.lateBound() {
			// Within the longest leader time-out of a deadline reached
			// late, its evidence stays: a time-out after an expired
			// hold is reported with the lateness that caused the hold.
			n.health.late, n.health.withheld = late, 0
		}
		return false
	}
	n.health.late, n.health.withheld = late, 0
	n.health.deadlineLate.note(now, late)
	n.drv.Settle()
	n.held = hold{deadline: d, began: now, until: now.Add(n.holdFor(late)), last: d}
	n.log.Debug("late for a deadline: withheld", "late", late, "for", n.held.until.Sub(now))
	if n.pending() == 0 {
		// Only with nothing queued: a loop that is behind has what to
		// handle first, and a flush would wait behind the same backlog.
		n.tr.Settle()
	}
	return true
}

// holdFor is how long a node that reached a deadline late by late
// withholds it: one heartbeat interval and the late bound, as any stall
// needs, and as long again as the node itself was stalled, because the
// leader stalled with it on the same host (or behind the same congested
// server) and needs as long to catch up, its own backlog first. The
// extra is bounded by the longest adaptive time-out
// (election.MaxAdaptiveTimeoutFactor).
func (n *Node) holdFor(late time.Duration) time.Duration {
	t := n.cfg.Election.Timing
	return n.ticks(t.HeartbeatTicks+lateTicks) + min(late, n.ticks(election.MaxAdaptiveTimeoutFactor*t.LeaderTimeoutTicks))
}

// release ends the hold, at at: heard if an event moved the deadline,
// else because it expired. A node whose algorithm has no leases (Bully,
// the ring) does not count the time it withheld the deadline, its own
// lateness, against what comes next: its machine's clock resumes at the
// deadline's tick, so that a leader heard in the hold has the whole
// time-out again, and a deadline that expired starts its next wait
// (Bully's T for an Answer) now instead of finding it spent. With leases
// (Paxos, byzantine) the machine's clock must keep pace with real time,
// which the lease argument bounds: it catches up (as after settle),
// from the deadline's tick, given first when the hold expired.
func (n *Node) release(at time.Time, heard bool) {
	h := n.held
	n.held.deadline = 0
	if !heard {
		n.metrics.withheld.WithLabelValues(withheldExpired).Inc()
		n.health.withheld = at.Sub(h.began)
	} else {
		n.metrics.withheld.WithLabelValues(withheldHeard).Inc()
	}
	if !n.cfg.Algorithm.Leases() {
		if skip := at.Sub(n.realAt(h.deadline - 1)); skip > 0 {
			n.offset += skip
		}
		return
	}
	if !heard {
		// The deadline's own tick is given now, as the last of its
		// advance: what the machine does at it (a campaign, a probe)
		// leaves, instead of counting among the stale ticks of the
		// catch-up that follows, whose messages the driver drops.
		// Sending it late is safe: a lease counts from the machine's
		// tick of the sending, which is earlier still.
		n.drv.Advance(n.drv.At(h.deadline))
	}
}

// machineTime is the time t on the machine's clock: real time less what
// the node did not count (release).
func (n *Node) machineTime(t time.Time) time.Time { return t.Add(-n.offset) }

// realAt is when the machine's tick k ends, in real time.
func (n *Node) realAt(k int) time.Time { return n.drv.At(k).Add(n.offset) }

// queued returns the next queued event without waiting: leadership claims
// first, so that no other traffic can delay them.
func (n *Node) queued() (transport.Inbound, bool) {
	in, _, ok := n.lanes.Next()
	return in, ok
}

// untilDeadline is how long from now until the machine's next deadline,
// or until the end of the hold on it; it sets when the loop should wake.
func (n *Node) untilDeadline() time.Duration {
	n.wake = n.realAt(n.drv.Deadline())
	if n.held.deadline != 0 {
		n.wake = n.held.until
	}
	return max(0, time.Until(n.wake))
}

// handle gives one queued event to the machine. An event ends a hold
// (release) when it moves the machine's deadline, makes it the leader,
// or changes the leader it follows: the news the hold waits for has
// come, or (the leader's connection closed) will never come, and the
// machine needs its clock to elect a successor. The deadline alone does
// not tell: the soonest one may be another clock's (the member time-outs
// of dynamic membership), which no message moves.
func (n *Node) handle(in transport.Inbound) {
	now := time.Now()
	var before election.SoftState
	if n.held.deadline != 0 {
		before = n.drv.Status()
	}
	lag := max(0, now.Sub(in.At))
	n.metrics.loopLag.Observe(lag.Seconds())
	n.health.loopLag.note(now, lag)
	switch in.Kind {
	case transport.PeerDown, transport.PeerSilent:
		n.log.Debug("peer down", "peer", in.Peer, "silent", in.Kind == transport.PeerSilent)
		n.health.down = in
		n.drv.PeerDown(in.Peer)
	case transport.PeerBack:
		n.log.Debug("peer back", "peer", in.Peer)
		n.drv.Reassert()
	case transport.Unreachable:
		n.metrics.unreachable.Inc()
		n.log.Debug("peer unreachable", "peer", in.Peer)
		n.drv.Unreachable(in.Peer)
	case transport.Message:
		n.log.Debug("receive", "msg", in.Msg)
		n.health.heardFrom(in.Msg.From, in.At)
		// With the tick it arrived in, which is later than the machine's
		// when settle hands it over before the deadline's tick: a Paxos
		// grant is counted from the arrival.
		n.drv.Step(in.Msg, n.machineTime(in.At))
	}
	if n.held.deadline == 0 {
		return
	}
	if after := n.drv.Status(); n.drv.Deadline() != n.held.deadline || after.Role == election.Leader || after.Leader != before.Leader {
		n.release(in.At, true)
	}
}
