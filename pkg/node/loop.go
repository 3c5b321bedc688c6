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
// out on messages that are waiting in its queue.
func (n *Node) loop(ctx context.Context) error {
	n.drv.Start(time.Now())
	timer := time.NewTimer(n.untilDeadline())
	defer timer.Stop()
	n.log.Info("node started", "algorithm", n.cfg.Algorithm, "members", n.members, "tick", n.cfg.Tick,
		"signed", n.cfg.Signer != nil, "incarnation", n.drv.Incarnation())
	if err := n.commit(); err != nil {
		return n.fail(err)
	}
	for {
		in, ok := n.queued()
		if !ok {
			// Nothing waits: catch up with the clock, then sleep until the
			// machine's next deadline or the next event.
			n.drv.Advance(time.Now())
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
				if err := n.settle(); err != nil {
					return n.fail(err)
				}
				continue
			case in = <-n.lanes.Claims():
			case in = <-n.lanes.Others():
			}
		}
		// This event and whatever else is queued, up to maxBatch, then one
		// commit: under load, one write of the state serves them all.
		for handled := 1; ; handled++ {
			n.drv.Advance(in.At)
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
// its own heartbeats and lease; it does not settle for them.
func (n *Node) settle() error {
	if n.drv.Status().Role == election.Leader {
		return nil
	}
	n.tr.Settle()
	in, ok := n.queued()
	if !ok {
		return nil
	}
	n.drv.Settle() // the ticks before the deadline's, which the loop slept for
	for ; ok; in, ok = n.queued() {
		n.handle(in)
	}
	return n.commit()
}

// queued returns the next queued event without waiting: leadership claims
// first, so that no other traffic can delay them.
func (n *Node) queued() (transport.Inbound, bool) {
	select {
	case in := <-n.lanes.Claims():
		return in, true
	default:
	}
	select {
	case in := <-n.lanes.Claims():
		return in, true
	case in := <-n.lanes.Others():
		return in, true
	default:
		return transport.Inbound{}, false
	}
}

// untilDeadline is how long from now until the machine's next deadline.
func (n *Node) untilDeadline() time.Duration {
	return max(0, time.Until(n.drv.At(n.drv.Deadline())))
}

// handle gives one queued event to the machine.
func (n *Node) handle(in transport.Inbound) {
	switch in.Kind {
	case transport.PeerDown:
		n.log.Debug("peer's connection closed", "peer", in.Peer)
		n.drv.PeerDown(in.Peer)
	case transport.Unreachable:
		n.metrics.unreachable.Inc()
		n.log.Debug("peer unreachable", "peer", in.Peer)
		n.drv.Unreachable(in.Peer)
	case transport.Message:
		n.log.Debug("receive", "msg", in.Msg)
		// With the tick it arrived in, which is later than the machine's
		// when settle hands it over before the deadline's tick: a Paxos
		// grant is counted from the arrival.
		n.drv.Step(in.Msg, in.At)
	}
}
