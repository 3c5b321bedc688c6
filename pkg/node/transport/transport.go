// Package transport is what a node's runtime needs of the network, at the
// level of the election protocol: it sends protocol.Messages and
// announcements, and receives messages that are already decoded and
// checked, with the time each arrived, on two bounded lanes, plus the
// peers found unreachable or whose connection closed.
//
// Two adapters implement Transport: pkg/node/natstransport, the one the
// node service runs on, which owns subjects, signatures, replay checks and
// NATS's connection events; and Network (memory.go), a small in-memory
// network on which the runtime's own tests run without a NATS server,
// inside testing/synctest bubbles.
package transport

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
)

// ErrClosed is returned by Connect when the connection closed under it.
var ErrClosed = errors.New("transport: connection closed")

// Transport is a node's connection to its cluster. Its methods, except
// Send, Announce, Lead and Settle, are safe for concurrent use; those four
// are called by the node's loop alone.
type Transport interface {
	// Connect returns once the connection is up (nil), when ctx ends
	// (ctx.Err()), or when the connection closes first (ErrClosed). From
	// then on the transport delivers what it receives to in, and counts
	// what it drops there.
	Connect(ctx context.Context, in *Lanes) error
	// Open starts receiving the election's messages for this node as
	// Self describes it. When it returns, the network knows where to
	// deliver them.
	Open(self Self) error
	// Send sends one message of the machine, already stamped by the
	// driver, to its receiver or to every member. A point-to-point
	// message whose receiver is gone comes back as an Unreachable
	// Inbound where the network can tell.
	Send(m protocol.Message) error
	// Announce publishes a leadership of this node to the cluster and its
	// clients.
	Announce(a protocol.Announcement)
	// Lead sets what this node answers the cluster's queries for the
	// leader with: a, until the monotonic time until (no end if zero);
	// nil answers nothing, and a query while no node answers fails at
	// once.
	Lead(a *protocol.Announcement, until time.Time)
	// Settle returns once what the network had delivered to this node
	// before the call is on the lanes (or after a bound of its own): a
	// message still unread when a deadline comes is handled before the
	// deadline's tick.
	Settle()
	// Connected reports whether the connection is up now.
	Connected() bool
	// Closed is closed when the connection closes under the node.
	Closed() <-chan struct{}
	// Watch sends on ch, without blocking, whenever the connection's
	// state changes, until stop is called.
	Watch(ch chan<- struct{}) (stop func())
	// Close stops receiving, delivers what was sent, and closes the
	// connection, within a bound of its own. Abort closes it at once.
	// Both are idempotent, and wait for every goroutine of the
	// transport.
	Close()
	Abort()
}

// Self is what a transport needs to know of the node it serves once the
// node's incarnation is chosen.
type Self struct {
	// Incarnation is the node's incarnation, and Started when it began on
	// the wall clock: a message addressed to an earlier incarnation, or
	// dated before it, is not for this process.
	Incarnation uint64
	Started     time.Time
}

// Kind tells what an Inbound brings.
type Kind uint8

// Kinds of Inbound.
const (
	// Message: a message of a member, decoded and checked.
	Message Kind = iota + 1
	// Unreachable: a point-to-point message found no receiver.
	Unreachable
	// PeerDown: a member's connection closed.
	PeerDown
	// PeerSilent: a member's process fell silent: its beats, which stand
	// for all its elections, stopped (natstransport's Shared beats). The
	// machine takes it as PeerDown.
	PeerSilent
	// PeerBack: a member may have missed what the elections sent: its
	// process beats again after it fell silent or its connection closed,
	// it beats for the first time, or (Peer is the node's own ID) this
	// process's connection came back. A leader claims again at once
	// (election.Reasserter).
	PeerBack
)

// Inbound is one thing the network brought to the node, with the time it
// arrived.
type Inbound struct {
	Kind Kind
	Msg  protocol.Message // of a Message
	Peer uint64           // of Unreachable, PeerDown, PeerSilent and PeerBack
	At   time.Time        // on the monotonic clock
}

// Claim reports whether m is a leadership claim, which travels apart from
// other traffic.
func Claim(m protocol.Message) bool {
	return m.Type == protocol.TypeHeartbeat || m.Type == protocol.TypeCoordinator
}

// ReasonInboxFull is the drop reason of a valid message that arrived while
// its lane was full. The other reasons are protocol.Reasons and the
// adapters' own.
const ReasonInboxFull protocol.Reason = "inbox_full"

// ReasonSenderLimit is the drop reason of a valid message from a member
// that sent more than its share: one chatty member (a bug, or a member that
// lies as itself) must not fill the queues and starve the others, the
// leader's heartbeats above all.
const ReasonSenderLimit protocol.Reason = "sender_limit"

// ReasonReplyNotInbox is the drop reason of a query whose reply subject is
// not an inbox: the leader answers only on the requester's inbox, never
// on a subject others read, where its answer, carrying its signature and
// published with the node's rights, would pass for something it did not
// send (a request with the reply subject election.<cluster>.leader would
// have it announce again, out of order, in the position starting nodes
// and applications read).
const ReasonReplyNotInbox protocol.Reason = "reply_not_inbox"

// ClaimsSize bounds the claims lane.
const ClaimsSize = 64

// Meter counts what reaches the lanes and what is dropped before; the
// node's metrics implement it.
type Meter interface {
	Received(protocol.Type)
	Dropped(protocol.Reason)
}

// Lanes are the two bounded queues between a transport and the node's
// loop, which owns them: leadership claims (heartbeats and Coordinators)
// and peers whose connection closed on one, everything else on the
// other, so that no other traffic delays the leader's heartbeats. Deliver
// never blocks; Lanes are safe for concurrent use.
//
// A lane holds memory for what waits on it, not for its bound: it grows
// as events queue, up to the bound, and lets its buffer go once emptied
// after a burst. An idle election of thousands in one process thus holds
// a few hundred bytes of lanes, not a buffer of its bound's size.
type Lanes struct {
	mu             sync.Mutex
	claims, others lane
	ready          chan struct{} // one notification pending: something was queued
	meter          Meter
}

// NewLanes returns lanes whose others lane holds size entries, the claims
// lane ClaimsSize, counting on meter.
func NewLanes(size int, meter Meter) *Lanes {
	return &Lanes{claims: lane{bound: ClaimsSize}, others: lane{bound: size}, ready: make(chan struct{}, 1), meter: meter}
}

// Deliver queues in on its lane, or drops and counts it if the lane is
// full; it reports whether in was queued.
func (l *Lanes) Deliver(in Inbound) bool {
	l.mu.Lock()
	q := &l.others
	if in.Kind == PeerDown || in.Kind == PeerSilent || (in.Kind == Message && Claim(in.Msg)) {
		q = &l.claims
	}
	queued := q.push(in)
	l.mu.Unlock()
	if !queued {
		l.meter.Dropped(ReasonInboxFull)
		return false
	}
	if in.Kind == Message {
		l.meter.Received(in.Msg.Type)
	}
	Notify(l.ready)
	return true
}

// Drop counts a message that was dropped before the lanes, for reason.
func (l *Lanes) Drop(reason protocol.Reason) { l.meter.Dropped(reason) }

// Ready receives once something was queued since the last receive: the
// reader then takes events (Next) until none is left.
func (l *Lanes) Ready() <-chan struct{} { return l.ready }

// Next takes the next event without waiting, leadership claims first;
// claim tells whether it came from the claims lane, ok whether there was
// one. Finding none, it also takes back the notification of events
// taken since (Ready), so that the reader does not wake for nothing; an
// event queued after it notifies again.
func (l *Lanes) Next() (in Inbound, claim, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if in, ok = l.claims.pop(); ok {
		return in, true, true
	}
	if in, ok = l.others.pop(); ok {
		return in, false, true
	}
	select {
	case <-l.ready:
	default:
	}
	return Inbound{}, false, false
}

// Wait takes the next event as Next does, waiting for one until ctx
// ends (ctx.Err()).
func (l *Lanes) Wait(ctx context.Context) (in Inbound, claim bool, err error) {
	for {
		if in, claim, ok := l.Next(); ok {
			return in, claim, nil
		}
		select {
		case <-l.ready:
		case <-ctx.Done():
			return Inbound{}, false, ctx.Err()
		}
	}
}

// Len is how many events wait on each lane.
func (l *Lanes) Len() (claims, others int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.claims.n, l.others.n
}

// lane is a FIFO of at most bound events in a ring that grows as they
// queue.
type lane struct {
	buf     []Inbound
	head, n int
	bound   int
}

// laneKeep is the buffer a lane keeps once emptied; a larger one, grown
// by a burst, is let go.
const laneKeep = 4

func (q *lane) push(in Inbound) bool {
	if q.n == q.bound {
		return false
	}
	if q.n == len(q.buf) {
		grown := make([]Inbound, min(q.bound, max(laneKeep, 2*len(q.buf))))
		k := copy(grown, q.buf[q.head:])
		copy(grown[k:], q.buf[:q.head])
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = in
	q.n++
	return true
}

func (q *lane) pop() (Inbound, bool) {
	if q.n == 0 {
		return Inbound{}, false
	}
	in := q.buf[q.head]
	q.buf[q.head] = Inbound{} // drop its references
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	if q.n == 0 {
		q.head = 0
		if len(q.buf) > laneKeep {
			q.buf = nil
		}
	}
	return in, true
}

// Notify sends on ch without blocking: one notification pending is enough
// for a watcher that reads the current state.
func Notify(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
